// Model: two segment pools, one for the hot blocks and one for the cold ones (a block's class
// known exactly), each cleaned by exact greedy within itself, NHOT of SEGS segments given to
// the hot pool. Scanning NHOT gives the best split a perfect hot/cold separation can reach.
// Build: gcc -O2 -o two_pools two_pools.c
// Usage: two_pools SEGS BLKS UTIL HOTPCT HOTSHARE NHOT [MEASURE_MULT]   (NHOT 0: one pool)
// e.g.   two_pools 1011 512 0.8684 20 80 250 2   (the 2 GiB seed 000 geometry, 80/20)
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
static uint64_t s=88172645463325252ULL; static inline uint64_t rnd(){s^=s<<13;s^=s>>7;s^=s<<17;return s;}
typedef struct { int nseg, bps, *valid, *owner_cnt; int open, openfill; int *freel, nfree; } Pool;
int SEGS,BPS; int *loc; // block -> seg*BPS+slot
int *slotblk; // seg*BPS+slot -> block or -1
int *segpool; char *isfree;
long moved=0, user=0;
Pool P[2];
int pick(Pool*p){ int best=-1,bv=1<<30; for(int i=0;i<SEGS;i++){ if(segpool[i]!=(p-P)) continue; if(i==p->open) continue; if(p->valid[i]<0||isfree[i]) continue; if(p->valid[i]<bv){bv=p->valid[i];best=i;} } return best; }
void append(Pool*p,int blk);
int cleaning=0;
void newopen(Pool*p){ if(p->nfree<1){fprintf(stderr,"out of space\n");exit(1);}
  p->open=p->freel[--p->nfree]; isfree[p->open]=0; p->openfill=0; p->valid[p->open]=0;
  if(cleaning) return;
  cleaning=1;
  while(p->nfree<=2){ int v=pick(p); if(v<0)break;
    int base=v*BPS; p->valid[v]=-1;
    for(int k=0;k<BPS;k++){int b=slotblk[base+k]; if(b>=0){ slotblk[base+k]=-1; moved++; append(p,b);} }
    p->valid[v]=0; isfree[v]=1; p->freel[p->nfree++]=v; }
  cleaning=0; }
void append(Pool*p,int blk){ if(p->open<0||p->openfill==BPS) newopen(p); int a=p->open*BPS+p->openfill++; slotblk[a]=blk; loc[blk]=a; p->valid[p->open]++; }
int main(int c,char**v){ SEGS=atoi(v[1]);BPS=atoi(v[2]);double u=atof(v[3]);int hp=atoi(v[4]),hs=atoi(v[5]);int nh=atoi(v[6]);double mm=c>7?atof(v[7]):2;
 long L=(long)(u*SEGS*BPS); long H=L*hp/100;
 loc=malloc(sizeof(int)*L); slotblk=malloc(sizeof(int)*SEGS*BPS); for(long i=0;i<(long)SEGS*BPS;i++)slotblk[i]=-1;
 segpool=malloc(sizeof(int)*SEGS); isfree=malloc(SEGS); int*valid=calloc(SEGS,sizeof(int));
 for(int k=0;k<2;k++){P[k].valid=valid;P[k].freel=malloc(sizeof(int)*SEGS);P[k].nfree=0;P[k].open=-1;}
 for(int i=0;i<SEGS;i++){int k=i<nh?0:1; segpool[i]=k; isfree[i]=1; P[k].freel[P[k].nfree++]=i;}
 for(long b=0;b<L;b++){ append(&P[(nh>0&&b<H)?0:1],(int)b); }
 long warm=L, meas=(long)(L*mm);
 for(long t=0;t<warm+meas;t++){ if(t==warm){moved=0;user=0;}
   long b; if((long)(rnd()%100)<hs) b=rnd()%H; else b=H+rnd()%(L-H);
   int a=loc[b]; slotblk[a]=-1; valid[a/BPS]--; user++; append(&P[(nh>0&&b<H)?0:1],(int)b); }
 printf("nhot %d waf %.3f\n",nh,(double)(user+moved)/user); }
