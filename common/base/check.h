// TANDEM_CHECK: bugs abort with a message. Never use it on outside input;
// bad input is a Status.
//
//   TANDEM_CHECK(n > 0) << "n=" << n;
//   TANDEM_CHECK_EQ(a, b);
#pragma once

#include <sstream>

namespace tandem::internal {

// Collects the streamed message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & stream` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace tandem::internal

#define TANDEM_CHECK(cond) \
  (cond) ? (void)0         \
         : ::tandem::internal::Voidify() & ::tandem::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define TANDEM_CHECK_OP_(a, op, b) TANDEM_CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define TANDEM_CHECK_EQ(a, b) TANDEM_CHECK_OP_(a, ==, b)
#define TANDEM_CHECK_NE(a, b) TANDEM_CHECK_OP_(a, !=, b)
#define TANDEM_CHECK_LT(a, b) TANDEM_CHECK_OP_(a, <, b)
#define TANDEM_CHECK_LE(a, b) TANDEM_CHECK_OP_(a, <=, b)
#define TANDEM_CHECK_GT(a, b) TANDEM_CHECK_OP_(a, >, b)
#define TANDEM_CHECK_GE(a, b) TANDEM_CHECK_OP_(a, >=, b)
// Aborts if a Status expression is not OK (for statuses that can only fail on a bug).
#define TANDEM_CHECK_OK(expr)                                 \
  do {                                                        \
    const auto& _tandem_chk = (expr);                         \
    TANDEM_CHECK(_tandem_chk.ok()) << _tandem_chk.ToString(); \
  } while (0)
