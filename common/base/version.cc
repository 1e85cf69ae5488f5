#include "common/base/version.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "unknown"
#endif

namespace tandem {

const char* BuildVersion() { return TANDEM_VERSION; }

}  // namespace tandem
