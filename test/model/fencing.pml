/*
 * Fencing tokens across N independent masters (issue 9), as
 * lib/operation.cpp and lib/scripts.cpp implement them, for Spin.
 *
 * The scheme. Each master keeps one counter per resource (no expiry). The
 * acquire script sets the key (SET NX PX) and answers the counter, read as
 * max(stored, the master's clock). A client that got a majority of grants
 * takes T = the largest counter answered + 1 and, in a second round, raises
 * the counter to T on every master where its value still holds. T is its
 * token only if that write reached a majority before the lock's validity
 * ended; otherwise the attempt fails and releases its keys.
 *
 * What is modelled: 3 masters, NC clients with ATTEMPTS attempts each, a
 * global clock that ticks at any moment (so any client can pause anywhere for
 * any number of ticks), keys that expire TTL ticks after they were set,
 * validity V < TTL ticks from the attempt's start (the drift allowance),
 * commands that never ran (a master down or blackholed), replies lost after
 * the command ran, partial attempts (grants on a minority), releases that may
 * be lost, unlock or letting the lock run out, and one master restarted
 * without its data at any moment. The restarted master is in quarantine for
 * QUAR >= TTL ticks (Options::restart_quarantine >= ttl): its answers count
 * for no majority until then, which is what keeps mutual exclusion.
 *
 * The clock is one global clock read by every master (the README states how
 * far real clocks may differ). A client's second round runs at least one tick
 * after its first: a round trip takes longer than the clock's resolution (one
 * microsecond for Redis TIME).
 *
 * The property: a holder's hold runs from the moment its token is handed to
 * it until it unlocks or its validity ends. When a token is handed out, it is
 * greater than the token of every holder whose hold has ended.
 *
 * Variants (spin -D...):
 *   ONE_ROUND  the first round increments each granting master's counter and
 *              the token is the largest one answered; no second round. Must
 *              fail: failed partial attempts make the counters diverge.
 *   NO_FLOOR   a restarted master's counter starts from 0, not from its clock.
 *              Must fail.
 */

#ifndef NC
#define NC 2
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 2
#endif
#define NM 3
#define MAJ 2
#define V 2
#define TTL 3
#define QUAR 3
#ifndef MAXT
#define MAXT 6
#endif

/* State that goes stale is cleared (an expired key, an ended hold, a finished
   quarantine), so that equal situations are one state. */
byte now = 1;
byte owner[NM];      /* the value there: 0 none, else client * ATTEMPTS + attempt + 1 */
byte expiry[NM];     /* the tick at which the key is gone; 0 with no key */
byte ctr[NM];        /* the stored counter */
byte votes_from[NM]; /* restart quarantine: no vote counts before this tick; 0 none */
byte htok[NC];       /* the token of each client's current hold, 0 when none */
byte hend[NC];       /* when that hold's validity ends */
byte ended_max;      /* the largest token of every hold that has ended */

#define voting(m) (votes_from[m] == 0)

#ifdef NO_FLOOR
#define read_counter(m) ctr[m]
#else
#define read_counter(m) (ctr[m] > now -> ctr[m] : now)
#endif

inline end_hold(c) {
  ended_max = (htok[c] > ended_max -> htok[c] : ended_max);
  htok[c] = 0;
  hend[c] = 0
}

/* What happens to one command sent to one master. Faults (a reply lost after
   the command ran, a command that never ran) are bounded by FAULTS per run. */
#ifndef FAULTS
#define FAULTS 3
#endif
byte faults;

#define ANSWERED 0
#define REPLY_LOST 1
#define NEVER_RAN 2

inline choose_fate() {
  if
  :: fate = ANSWERED
  :: faults < FAULTS -> faults++; fate = REPLY_LOST
  :: faults < FAULTS -> faults++; fate = NEVER_RAN
  fi
}

/* Each release: delivered to a master, or lost (a fault). */
inline release(v) {
  for (m : 0 .. NM - 1) {
    atomic {
      if
      :: owner[m] == v ->
         if
         :: owner[m] = 0; expiry[m] = 0
         :: faults < FAULTS -> faults++
         fi
      :: else -> skip
      fi
    }
  }
  m = 0
}

proctype Client(byte c) {
  byte attempt = 0, v, m, fate, yes, wrote, t0, tread, T;

  do
  :: attempt < ATTEMPTS ->
     atomic {
       v = c * ATTEMPTS + attempt + 1;
       attempt++;
       t0 = now
     };
     /* First round: the acquire script on each master, one at a time, in any
        interleaving with the clock, the other clients and the restart. */
     for (m : 0 .. NM - 1) {
       atomic {
         if
         :: owner[m] == 0 ->
            choose_fate();
            if
            :: fate != NEVER_RAN ->
               owner[m] = v;
               expiry[m] = now + TTL;
#ifdef ONE_ROUND
               ctr[m] = read_counter(m) + 1;
#endif
               if
               :: fate == ANSWERED && voting(m) ->
                  yes++;
#ifdef ONE_ROUND
                  T = (ctr[m] > T -> ctr[m] : T)
#else
                  T = (read_counter(m) > T -> read_counter(m) : T)
#endif
               :: else -> skip
               fi
            :: else -> skip
            fi;
            fate = 0
         :: else -> skip /* refused */
         fi
       }
     }
     m = 0;
     if
     :: yes < MAJ || now >= t0 + V -> release(v)
     :: else ->
#ifdef ONE_ROUND
        wrote = MAJ;
#else
        /* Second round: raise the counter to T where our value holds. */
        atomic { T = T + 1; tread = now };
        if
        :: now > tread -> skip
        :: now == MAXT -> skip /* the clock has stopped: the round below is late */
        fi;
        for (m : 0 .. NM - 1) {
          atomic {
            if
            :: owner[m] == v ->
               choose_fate();
               if
               :: fate != NEVER_RAN ->
                  ctr[m] = (ctr[m] > T -> ctr[m] : T);
                  if
                  :: fate == ANSWERED && voting(m) -> wrote++
                  :: else -> skip
                  fi
               :: else -> skip
               fi;
               fate = 0
            :: else -> skip /* not ours any more */
            fi
          }
        }
        m = 0;
#endif
        if
        :: atomic {
             wrote >= MAJ && now < t0 + V && now > tread ->
             /* The token is handed over: above every ended hold's. */
             assert(T > ended_max);
             htok[c] = T;
             hend[c] = t0 + V
           };
           /* Hold: unlock at some moment, or let the validity run out. */
           if
           :: atomic { htok[c] != 0 -> end_hold(c) };
              release(v)
           :: true -> skip
           fi
        :: else -> release(v)
        fi
     fi;
     atomic { yes = 0; wrote = 0; t0 = 0; tread = 0; T = 0 }
  :: else -> break
  od
}

active proctype Clock() {
  byte i;
  do
  :: now < MAXT ->
     d_step {
       now++;
       i = 0;
       do
       :: i < NM ->
          if
          :: expiry[i] != 0 && expiry[i] <= now -> owner[i] = 0; expiry[i] = 0
          :: else -> skip
          fi;
          if
          :: votes_from[i] != 0 && votes_from[i] <= now -> votes_from[i] = 0
          :: else -> skip
          fi;
          i++
       :: else -> break
       od;
       i = 0;
       do
       :: i < NC ->
          if
          :: htok[i] != 0 && hend[i] <= now -> end_hold(i)
          :: else -> skip
          fi;
          i++
       :: else -> break
       od;
       i = 0
     }
  :: else -> break
  od
}

active proctype Restart() {
  byte m;
  if
  :: m = 0
  :: m = 1
  :: m = 2
  fi;
  d_step {
    owner[m] = 0;
    expiry[m] = 0;
    ctr[m] = 0;
    votes_from[m] = now + QUAR;
    m = 0
  }
}

init {
  atomic {
    run Client(0);
    run Client(1);
#if NC > 2
    run Client(2);
#endif
  }
}
