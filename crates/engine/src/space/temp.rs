//! Data temperature by rewrite age (`-o data_temp=age`, the default): which data log a
//! user's write goes to, and where the cleaner's copies go.
//!
//! A block that is overwritten soon after it was written is likely to be overwritten soon
//! again; one that lived long is likely to live long. We learn that without memory per
//! block: the old copy's section has an age stamp on the allocation clock (`Sections`: the
//! clock when a block was last written into it), so the old copy's age is known to within the
//! time its section took to fill. An overwrite whose old copy is younger than a limit goes to
//! the hot data log; every other overwrite, and every first write, to the warm one.
//!
//! The limit is the time the user takes to write as many blocks as the volume holds valid
//! (times [`HOT_FRACTION`]): in units of user writes the mean rewrite age is the number of
//! live blocks whatever the skew (each block's rewrite interval, weighted by how often it is
//! rewritten: Little's law), so a block rewritten within that time is rewritten more often
//! than the average one. The clock the stamps use also ticks for the cleaner's and the
//! nodes' writes, so the limit is converted with a moving mean of the clock's advance per
//! user block written.
//!
//! A block whose old copy is in the cold log was put there by the cleaner: it outlived a
//! section's cleaning, and its section's stamp is the move, not the user's write. Its
//! overwrite counts as old (warm). The cleaner moves the blocks of a hot section to the warm
//! log (they outlived the hot log), and those of any other section to the cold log.
//!
//! Sections found in use at mount have stamps below every new one, in SIT mtime order: their
//! blocks' ages are unknown and their overwrites count as old.

/// How a mount places user data among the data logs (`data_temp=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DataTemp {
    /// Overwrites of young blocks go to the hot data log, the cleaner moves a hot section's
    /// blocks to the warm log (the module's rules).
    Age,
    /// Every user data block of a regular file goes to the warm data log, everything the
    /// cleaner moves to the cold one.
    Off,
}

impl DataTemp {
    pub fn name(self) -> &'static str {
        match self {
            DataTemp::Age => "age",
            DataTemp::Off => "off",
        }
    }
}

/// The moving mean's weight of each user block written: about the last 4096 count.
const RATE_WEIGHT: f64 = 1.0 / 4096.0;

/// The limit, as a fraction of the time the user takes to write as many blocks as are valid.
const HOT_FRACTION: f64 = 1.0;

/// The clock's pace and what the rule decided.
pub(crate) struct Temperature {
    /// Stamps below this were given at mount: their ages are unknown.
    base: u64,
    /// The clock at the last user block written, and the moving mean of its advance per
    /// user block (0 before the second).
    last_clock: Option<u64>,
    rate: f64,
    /// The limit last used, in clock blocks.
    limit: u64,
    /// Overwrites sent to the hot log, and the others (warm).
    pub hot: u64,
    pub warm: u64,
}

impl Temperature {
    pub fn new(base: u64) -> Temperature {
        Temperature {
            base,
            last_clock: None,
            rate: 0.0,
            limit: 0,
            hot: 0,
            warm: 0,
        }
    }

    /// A user block is written at `clock`, with `valid` blocks in use: the pace and the limit
    /// move on.
    pub fn tick(&mut self, clock: u64, valid: u64) {
        if let Some(last) = self.last_clock {
            let d = clock.saturating_sub(last) as f64;
            self.rate = if self.rate == 0.0 {
                d
            } else {
                self.rate + (d - self.rate) * RATE_WEIGHT
            };
        }
        self.last_clock = Some(clock);
        self.limit = (valid as f64 * self.rate * HOT_FRACTION) as u64;
    }

    /// Whether an overwrite whose old copy's section is stamped `stamp` is hot at `clock`
    /// (after `tick`); counted either way.
    pub fn is_hot(&mut self, stamp: u64, clock: u64) -> bool {
        let hot = stamp >= self.base && clock.saturating_sub(stamp) < self.limit;
        if hot {
            self.hot += 1;
        } else {
            self.warm += 1;
        }
        hot
    }

    /// An overwrite that counts as old whatever its stamp.
    pub fn old(&mut self) {
        self.warm += 1;
    }

    /// The limit last used, in blocks of the allocation clock.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}
