#pragma once
// errorCodeOf(r): the error code of a Result, or none if it succeeded, for comparisons such as
// EXPECT_EQ(errorCodeOf(r), ErrorCode::Io): a call that should fail but did not fails the
// comparison instead of reading an error that is not there.

#include <optional>

#include "base/result.h"

namespace spillway::testing_support {

template <class T>
std::optional<ErrorCode> errorCodeOf(const Result<T>& r)
{
    if (r.ok()) return std::nullopt;
    return r.error().code;
}

}  // namespace spillway::testing_support
