#include "common/base/build_info.h"

#include "common/base/build_commit.h"  // generated into the build folder

namespace tandem {

std::string_view BuildCommit() { return TANDEM_BUILD_COMMIT; }

}  // namespace tandem
