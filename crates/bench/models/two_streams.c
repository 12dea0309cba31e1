// Model: hot and cold blocks written to two streams (a block's class known exactly), one
// shared free list, victims picked over all segments by greedy (g) or cost-benefit (c);
// a victim's blocks go back to their class's stream (MODE 0) or to one cleaner stream (1).
// Build: gcc -O2 -o two_streams two_streams.c
// Usage: two_streams SEGS BLKS UTIL HOTPCT HOTSHARE g|c MODE [MEASURE_MULT]
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
static uint64_t s=88172645463325252ULL; static inline uint64_t rnd(){s^=s<<13;s^=s>>7;s^=s<<17;return s;}
int SEGS,BPS,*loc,*slotblk,*valid,*freel,nfree,cleaning; char*isfree; long *age; long now;
int open_[3],fill[3]; long moved,user; long H; char pol; int mode;
int isopen(int i){return i==open_[0]||i==open_[1]||i==open_[2];}
int pick(){int best=-1;double bv=1e18;for(int i=0;i<SEGS;i++){if(isfree[i]||isopen(i)||valid[i]<0)continue;
 double sc; if(pol=='g') sc=valid[i]; else {double u=(double)valid[i]/BPS; if(u>=1)continue; sc=-( (1-u)*(double)(now-age[i]) / (1+u));}
 if(sc<bv){bv=sc;best=i;}} return best;}
void append(int st,int blk);
void newopen(int st){ if(nfree<1){fprintf(stderr,"out\n");exit(1);} int o=freel[--nfree]; isfree[o]=0; open_[st]=o; fill[st]=0; valid[o]=0;
 if(cleaning)return;
 cleaning=1;
 while(nfree<=3){int v=pick(); if(v<0)break; int base=v*BPS; valid[v]=-1;
  for(int k=0;k<BPS;k++){int b=slotblk[base+k]; if(b>=0){slotblk[base+k]=-1;moved++; append(mode?2:(b<H?0:1),b);}}
  valid[v]=0; isfree[v]=1; freel[nfree++]=v;}
 cleaning=0;}
void append(int st,int blk){ if(open_[st]<0||fill[st]==BPS) newopen(st); int a=open_[st]*BPS+fill[st]++; slotblk[a]=blk; loc[blk]=a; valid[open_[st]]++; age[open_[st]]=now; }
int main(int c,char**v){SEGS=atoi(v[1]);BPS=atoi(v[2]);double u=atof(v[3]);int hp=atoi(v[4]),hs=atoi(v[5]);pol=v[6][0];mode=atoi(v[7]);double mm=c>8?atof(v[8]):2;
 long L=(long)(u*SEGS*BPS); H=L*hp/100; loc=malloc(sizeof(int)*L); slotblk=malloc(sizeof(int)*SEGS*BPS); for(long i=0;i<(long)SEGS*BPS;i++)slotblk[i]=-1;
 valid=calloc(SEGS,sizeof(int)); freel=malloc(sizeof(int)*SEGS); isfree=malloc(SEGS); age=calloc(SEGS,sizeof(long));
 for(int i=0;i<SEGS;i++){isfree[i]=1;freel[nfree++]=SEGS-1-i;} open_[0]=open_[1]=open_[2]=-1;
 for(long b=0;b<L;b++)append(b<H?0:1,(int)b);
 long warm=L,meas=(long)(L*mm);
 for(long t=0;t<warm+meas;t++){ now=t; if(t==warm){moved=0;user=0;} long b; if((long)(rnd()%100)<hs) b=rnd()%H; else b=H+rnd()%(L-H);
  int a=loc[b]; slotblk[a]=-1; valid[a/BPS]--; user++; append(b<H?0:1,(int)b);}
 printf("policy %c mode %d waf %.3f\n",pol,mode,(double)(user+moved)/user);}
