// What of the reconciler's memory survives a restart of `tandemctl serve`: the restart budget
// and its history, the backoffs, operator-needed and why it is waiting. PURE: the caller reads
// both clocks once and passes them in.
//
// The reconciler runs on the steady clock (immune to clock changes), which means nothing
// outside this process; the state file therefore holds wall-clock times. A time t on the
// steady clock is stored as unix_now - (steady_now - t) and read back the other way, so an
// attempt made 4 minutes before serve stopped is still 4 minutes old (plus the downtime) after.
#pragma once

#include <cstdint>

#include "controller/controller_state.h"
#include "controller/reconciler.h"

namespace tandem::controller {

ServeRecord ToServeRecord(const ReconcilerMemory& memory, TimePoint steady_now, int64_t unix_now_ms);
ReconcilerMemory FromServeRecord(const ServeRecord& record, TimePoint steady_now, int64_t unix_now_ms);

}  // namespace tandem::controller
