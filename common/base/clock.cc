#include "common/base/clock.h"

namespace tandem {

Clock& Clock::Real() {
  static SystemClock clock;
  return clock;
}

}  // namespace tandem
