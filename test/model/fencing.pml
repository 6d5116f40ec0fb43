/*
 * Fencing tokens across N independent masters (issue 9), as lib/operation.cpp
 * and lib/scripts.cpp implement them, for the Spin model checker
 * (scripts/model-check.sh runs it).
 *
 * The scheme. Each master keeps one counter per resource, with no expiry.
 * The acquire script sets the key (SET NX PX) and answers the counter. A
 * client that got a majority of grants takes T = the largest counter
 * answered + 1 and, in a second round, raises the counter to T on every
 * master where its value still holds. T is its token only if that write
 * reached a majority while the lock was still valid; otherwise the attempt
 * fails and releases its keys.
 *
 * Modelled: 3 masters; NC clients (2 or 3) with ATTEMPTS attempts each; each
 * command to each master is one atomic step, in any interleaving with the
 * other clients, so rounds overlap master by master; up to FAULTS faults in a
 * run, each a command that never ran (master down, blackholed, a lost
 * request) or a reply lost after the command ran (both count as failed
 * votes), a lost release included; partial attempts (grants on a minority,
 * from faults or from contention); unlock, or letting the lock run out; one
 * master restarted without its data at any moment; with FORGET, one master's
 * counter alone forgotten at any moment (it expires a day after its last
 * write), its lock keys kept.
 *
 * Time is not a clock here but the order of events, which is all the
 * algorithm relies on:
 *   - a client's validity can end at any moment (a pause, a slow network);
 *     a decision is made only while it lasts;
 *   - a key can vanish (expire) at any moment, except while its attempt's
 *     validity lasts (ttl > validity: the drift allowance);
 *   - a restarted master forgets its keys and its counter and does not vote
 *     (restart_quarantine >= ttl) until every attempt that was under way at
 *     the restart has ended or lost its validity;
 *   - its counter then reads at least every T computed before the restart:
 *     the clock assumption of docs/fencing.md (the scripts floor the counter by the
 *     master's TIME in microseconds, and a token is never ahead of the
 *     fastest master clock);
 *   - a counter that expired (FORGET) reads at least every T written to it:
 *     it expires a day after the last fence round that reached it, and the
 *     master's clock is then past every token computed up to that round
 *     (clocks a day apart at most). Tokens computed later and never written
 *     there may be larger: the model lets them be.
 * This allows more than the real timings do (keys of finished attempts may
 * vanish early), so a property that holds here holds there.
 *
 * The property (assert): a holder's hold runs from the moment its token is
 * handed over until it unlocks or its validity ends. A token handed over is
 * greater than the token of every hold that has ended.
 *
 * Negative variants (spin -D...), each must find a counter-example:
 *   ONE_ROUND  no second round: the first round increments each granting
 *              master's counter and the token is the largest one answered
 *              ("INCR on each master, take the max"); failed partial attempts
 *              make the counters diverge.
 *   NO_FLOOR   a restarted master's counter starts again from 0.
 *   FORGET_TO_ZERO  with FORGET: the forgotten counter starts again from 0.
 * NO_RESTART leaves the restart out (the first variant needs none).
 */

#ifndef NC
#define NC 2
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 2
#endif
#ifndef FAULTS
#define FAULTS 2
#endif
#define NM 3
#define MAJ 2

byte owner[NM];      /* the value a master holds: 0 none, else c * ATTEMPTS + attempt + 1 */
byte ctr[NM];        /* its counter */
bool quarantined[NM];/* restarted, not voting yet */
byte cur[NC];        /* each client's attempt under way (its value), 0 none */
bool valid[NC];      /* that attempt's validity lasts */
bool qwait[NC];      /* that attempt was under way at the restart: the quarantine waits for it */
byte htok[NC];       /* the token of each client's hold, 0 when it holds nothing */
byte ended_max;      /* the largest token of every hold that has ended */
byte maxT;           /* ghost: the largest T computed so far */
byte wmax[NM];       /* ghost: the largest T ever written to each master's counter */
byte faults;         /* faults so far */

#define client_of(v) ((v - 1) / ATTEMPTS)
/* A key outlives its attempt's validity, nothing more is promised. */
#define may_vanish(v) (!(cur[client_of(v)] == v && valid[client_of(v)]))
#define nobody_waited (!qwait[0] && !qwait[1] && (NC < 3 || !qwait[NC - 1]))

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

inline end_hold(c) {
  ended_max = (htok[c] > ended_max -> htok[c] : ended_max);
  htok[c] = 0
}

/* The attempt is over: its keys may vanish from now on. */
inline end_attempt(c) {
  atomic { cur[c] = 0; valid[c] = false; qwait[c] = false }
}

/* Delivered to each master, or lost (a fault). */
inline release(v) {
  for (m : 0 .. NM - 1) {
    atomic {
      if
      :: owner[m] == v ->
         if
         :: owner[m] = 0
         :: faults < FAULTS -> faults++
         fi
      :: else -> skip
      fi
    }
  }
  m = 0
}

proctype Client(byte c) {
  byte attempt = 0, v, m, fate, yes, wrote, T;

  do
  :: attempt < ATTEMPTS ->
     atomic {
       v = c * ATTEMPTS + attempt + 1;
       attempt++;
       cur[c] = v;
       valid[c] = true
     };
     /* First round: the acquire script, master by master. */
     for (m : 0 .. NM - 1) {
       atomic {
         if
         :: owner[m] == 0 ->
            choose_fate();
            if
            :: fate != NEVER_RAN ->
               owner[m] = v;
#ifdef ONE_ROUND
               ctr[m]++;
#endif
               if
               :: fate == ANSWERED && !quarantined[m] -> yes++; T = (ctr[m] > T -> ctr[m] : T)
               :: else -> skip
               fi
            :: else -> skip
            fi;
            fate = 0
         :: else -> skip /* refused: another value holds it */
         fi
       }
     }
     m = 0;
     if
     :: yes < MAJ || !valid[c] ->
        atomic { yes = 0; T = 0 };
        release(v)
     :: else ->
        yes = 0;
#ifdef ONE_ROUND
        atomic { maxT = (T > maxT -> T : maxT); wrote = MAJ };
#else
        /* Second round: raise the counter to T where our value holds. */
        atomic { T = T + 1; maxT = (T > maxT -> T : maxT) };
        for (m : 0 .. NM - 1) {
          atomic {
            if
            :: owner[m] == v ->
               choose_fate();
               if
               :: fate != NEVER_RAN ->
                  ctr[m] = (ctr[m] > T -> ctr[m] : T);
                  wmax[m] = (wmax[m] > T -> wmax[m] : T);
                  if
                  :: fate == ANSWERED && !quarantined[m] -> wrote++
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
             wrote >= MAJ && valid[c] ->
             /* The token is handed over: above every ended hold's. */
             assert(T > ended_max);
             htok[c] = T;
             wrote = 0;
             T = 0
           };
           /* Hold: unlock at some moment, or let the validity run out. */
           if
           :: atomic { htok[c] != 0 -> end_hold(c) };
              release(v)
           :: !valid[c] -> skip
           fi
        :: else ->
           atomic { wrote = 0; T = 0 };
           release(v)
        fi
     fi;
     end_attempt(c)
  :: else -> break
  od
}

/* The passing of time: a validity ends, a key expires, a quarantine ends. */
inline validity_ends(c) {
  valid[c] = false;
  qwait[c] = false;
  if
  :: htok[c] != 0 -> end_hold(c)
  :: else -> skip
  fi
}

active proctype Time() {
end:
  do
  :: atomic { valid[0] -> validity_ends(0) }
  :: atomic { valid[1] -> validity_ends(1) }
#if NC > 2
  :: atomic { valid[2] -> validity_ends(2) }
#endif
  :: atomic { owner[0] != 0 && may_vanish(owner[0]) -> owner[0] = 0 }
  :: atomic { owner[1] != 0 && may_vanish(owner[1]) -> owner[1] = 0 }
  :: atomic { owner[2] != 0 && may_vanish(owner[2]) -> owner[2] = 0 }
  :: atomic { quarantined[0] && nobody_waited -> quarantined[0] = false }
  :: atomic { quarantined[1] && nobody_waited -> quarantined[1] = false }
  :: atomic { quarantined[2] && nobody_waited -> quarantined[2] = false }
  od
}

#ifndef NO_RESTART
active proctype Restart() {
  byte m, c;
  atomic {
    select (m : 0 .. NM - 1);
    owner[m] = 0;
#ifdef NO_FLOOR
    ctr[m] = 0;
#else
    ctr[m] = maxT;
#endif
    quarantined[m] = true;
    for (c : 0 .. NC - 1) {
      qwait[c] = cur[c] != 0 && valid[c]
    }
    m = 0;
    c = 0
  }
}
#endif

#ifdef FORGET
active proctype Forget() {
  byte m;
  atomic {
    select (m : 0 .. NM - 1);
#ifdef FORGET_TO_ZERO
    ctr[m] = 0;
#else
    ctr[m] = wmax[m];
#endif
    m = 0
  }
}
#endif

init {
  atomic {
    run Client(0);
    run Client(1);
#if NC > 2
    run Client(2);
#endif
  }
}
