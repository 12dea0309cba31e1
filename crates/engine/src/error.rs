//! Engine errors: I/O, incompatible (named feature), corrupt (structure and place), and the
//! errors a user's request can meet (no such file, not a directory...), each with one errno.

use uf2fs_format::{CorruptKind, FormatError, Incompatible};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error while reading {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("not supported: {0}")]
    Incompatible(#[from] Incompatible),
    #[error("corrupt image: {0}")]
    Corrupt(#[from] CorruptKind),
    #[error("no such file or directory")]
    NotFound,
    #[error("not a directory")]
    NotADirectory,
    #[error("is a directory")]
    IsADirectory,
    #[error("not a symbolic link")]
    NotASymlink,
    #[error("too many levels of symbolic links")]
    SymlinkLoop,
    #[error("file name too long")]
    NameTooLong,
    #[error("no such attribute")]
    NoAttribute,
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    #[error("{0}")]
    Unsupported(String),
    #[error("no space left on the device")]
    NoSpace,
    #[error("read-only: {0}")]
    ReadOnly(String),
    #[error("file exists")]
    Exists,
    #[error("directory not empty")]
    NotEmpty,
    #[error("operation not permitted: {0}")]
    NotPermitted(&'static str),
    #[error("file too large")]
    FileTooBig,
    /// No room for this request (ENOSPC), though the volume has space: not a failure.
    #[error("no space: {0}")]
    NoRoom(&'static str),
    /// A seek for data or a hole at or past the end of the file (ENXIO).
    #[error("no data or hole at or past the end of the file")]
    PastEnd,
    /// The contents (or a name in) an encrypted file or directory were asked for, or a change
    /// inside one, and we hold no key (ENOKEY, as Linux answers without the key). `key` names
    /// the key that would be needed.
    #[error("inode {ino} is encrypted and no key was given (it needs the {key})")]
    NoKey { ino: u32, key: String },
    /// A device of a multi-device volume that is missing, too small, or more than the volume
    /// has (ENODEV).
    #[error("{0}")]
    Device(String),
    /// The image is locked by another process (mounted, or being changed).
    #[error("{0}")]
    Busy(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        match e {
            FormatError::Corrupt(c) => Error::Corrupt(c),
            FormatError::Incompatible(i) => Error::Incompatible(i),
        }
    }
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        if source.kind() == std::io::ErrorKind::ResourceBusy {
            return Error::Busy(source.to_string());
        }
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// The errno a system call would return for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io { .. } | Error::Corrupt(_) => 5, // EIO
            Error::Incompatible(_) => 95,              // EOPNOTSUPP
            Error::NotFound => 2,                      // ENOENT
            Error::NotADirectory => 20,                // ENOTDIR
            Error::IsADirectory => 21,                 // EISDIR
            Error::NotASymlink => 22,                  // EINVAL
            Error::SymlinkLoop => 40,                  // ELOOP
            Error::NameTooLong => 36,                  // ENAMETOOLONG
            Error::NoAttribute => 61,                  // ENODATA
            Error::InvalidArgument(_) => 22,           // EINVAL
            Error::Unsupported(_) => 95,               // EOPNOTSUPP
            Error::NoSpace => 28,                      // ENOSPC
            Error::ReadOnly(_) => 30,                  // EROFS
            Error::Exists => 17,                       // EEXIST
            Error::NotEmpty => 39,                     // ENOTEMPTY
            Error::NotPermitted(_) => 1,               // EPERM
            Error::FileTooBig => 27,                   // EFBIG
            Error::NoRoom(_) => 28,                    // ENOSPC
            Error::PastEnd => 6,                       // ENXIO
            Error::Busy(_) => 16,                      // EBUSY
            Error::NoKey { .. } => 126,                // ENOKEY
            Error::Device(_) => 19,                    // ENODEV
        }
    }
}
