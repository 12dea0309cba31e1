// Model of uf2fs's `data_temp=age` rule (space/temp.rs) without nodes or held space: a
// first write goes warm; a rewrite goes hot if the old copy's segment was last written less
// than LIMIT x (live blocks) user writes ago and is not a cold-log segment, else warm; the
// cleaner picks by cost-benefit (or greedy: last argument g) over all segments and sends a
// hot, warm or cold victim's blocks to log DESTHOT, DESTWARM, DESTCOLD (0 hot, 1 warm,
// 2 cold; uf2fs does 1 2 2). YOUNG=x in the environment keeps a hot victim's blocks hot
// when it was last written less than x (live blocks) writes ago. HOTPCT 0 means Zipf 0.9
// over the blocks instead of hot/cold.
// Build: gcc -O2 -o stamp_rule stamp_rule.c -lm
// Usage: stamp_rule SEGS BLKS UTIL HOTPCT HOTSHARE LIMIT DESTHOT DESTWARM DESTCOLD [MULT] [c|g]
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <math.h>
static uint64_t s=88172645463325252ULL; static inline uint64_t rnd(){s^=s<<13;s^=s>>7;s^=s<<17;return s;}
double *cdf; long NL;
long zipf(){ double x=(double)(rnd()>>11)/9007199254740992.0; long lo=0,hi=NL-1; while(lo<hi){long m=(lo+hi)/2; if(cdf[m]<x) lo=m+1; else hi=m;} return lo; }

int SEGS,BPS,*loc,*slotblk,*valid,*freel,nfree,cleaning,dest[3]; char*isfree,*typ; long *age; long now;
int open_[3],fill[3]; long moved,user,tohot,towarm; char pol='c';
int isopen(int i){return i==open_[0]||i==open_[1]||i==open_[2];}
int pick(){int best=-1;double bv=1e18;for(int i=0;i<SEGS;i++){if(isfree[i]||isopen(i)||valid[i]<0)continue;
 double sc; if(pol=='g') sc=valid[i]; else {double u=(double)valid[i]/BPS; if(u>=1)continue; sc=-((1-u)*(double)(now-age[i]+1)/(1+u));}
 if(sc<bv){bv=sc;best=i;}} return best;}
void append(int st,int blk);
void newopen(int st){ if(nfree<1){fprintf(stderr,"out\n");exit(1);} int o=freel[--nfree]; isfree[o]=0; open_[st]=o; fill[st]=0; valid[o]=0; typ[o]=st;
 if(cleaning)return;
 cleaning=1;
 while(nfree<=3){int v=pick(); if(v<0)break; int base=v*BPS; valid[v]=-1; int d=dest[(int)typ[v]]; if(typ[v]==0 && getenv("YOUNG") && now-age[v] < atof(getenv("YOUNG"))*NL) d=0;
  for(int k=0;k<BPS;k++){int b=slotblk[base+k]; if(b>=0){slotblk[base+k]=-1;moved++; append(d,b);}}
  valid[v]=0; isfree[v]=1; freel[nfree++]=v;}
 cleaning=0;}
void append(int st,int blk){ if(open_[st]<0||fill[st]==BPS) newopen(st); int a=open_[st]*BPS+fill[st]++; slotblk[a]=blk; loc[blk]=a; valid[open_[st]]++; age[open_[st]]=now; }
int main(int c,char**v){SEGS=atoi(v[1]);BPS=atoi(v[2]);double u=atof(v[3]);int hp=atoi(v[4]),hs=atoi(v[5]);double lm=atof(v[6]);dest[0]=atoi(v[7]);dest[1]=atoi(v[8]);dest[2]=atoi(v[9]);double mm=c>10?atof(v[10]):2; if(c>11)pol=v[11][0];
 long L=(long)(u*SEGS*BPS); long H=L*hp/100; NL=L; if(hp==0){ cdf=malloc(sizeof(double)*L); double t=0; for(long i=0;i<L;i++){t+=pow(i+1,-0.9); cdf[i]=t;} for(long i=0;i<L;i++)cdf[i]/=t; } loc=malloc(sizeof(int)*L); slotblk=malloc(sizeof(int)*SEGS*BPS); for(long i=0;i<(long)SEGS*BPS;i++)slotblk[i]=-1;
 valid=calloc(SEGS,sizeof(int)); freel=malloc(sizeof(int)*SEGS); isfree=malloc(SEGS); typ=calloc(SEGS,1); age=calloc(SEGS,sizeof(long));
 for(int i=0;i<SEGS;i++){isfree[i]=1;freel[nfree++]=SEGS-1-i;} open_[0]=open_[1]=open_[2]=-1;
 for(long b=0;b<L;b++)append(1,(int)b);
 long warm=L,meas=(long)(L*mm); long limit=(long)(lm*L);
 for(long t=0;t<warm+meas;t++){ now=t; if(t==warm){moved=0;user=0;tohot=towarm=0;} long b; if(hp==0) b=zipf(); else if((long)(rnd()%100)<hs) b=rnd()%H; else b=H+rnd()%(L-H);
  int a=loc[b]; int os=a/BPS; slotblk[a]=-1; valid[os]--; user++;
  int st = (typ[os]!=2 && now-age[os] < limit) ? 0 : 1; if(st==0)tohot++; else towarm++;
  append(st,(int)b);}
 printf("limit %.2fL dest %d%d%d waf %.3f hot %.2f\n",lm,dest[0],dest[1],dest[2],(double)(user+moved)/user,(double)tohot/user);}
