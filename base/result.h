#pragma once
// Errors as values at module boundaries: no exception crosses a public interface.

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace spillway {

// Values are shown to users and stored in logs; never reuse a number.
enum class ErrorCode {
    InvalidArgument = 1,
    ModelFileInvalid = 2,   // a model file is corrupt, truncated or inconsistent
    UnsupportedModel = 3,   // valid file, but an architecture/type we do not run
    Io = 4,
    DiskFull = 5,
    OutOfMemory = 6,
    OutOfDeviceMemory = 7,
    DeviceLost = 8,
    BackendUnavailable = 9,
    Cancelled = 10,
    Sql = 11,
    Internal = 12,
};

const char* errorCodeName(ErrorCode code);

struct Error {
    ErrorCode code = ErrorCode::Internal;
    std::string message;  // one line, names the file or object and what is wrong
};

inline Error makeError(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : m_v(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : m_v(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return m_v.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { assert(ok()); return std::get<0>(m_v); }
    const T& value() const& { assert(ok()); return std::get<0>(m_v); }
    T&& value() && { assert(ok()); return std::get<0>(std::move(m_v)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const { assert(!ok()); return std::get<1>(m_v); }

private:
    std::variant<T, Error> m_v;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : m_error(std::move(error)), m_ok(false) {}

    bool ok() const { return m_ok; }
    explicit operator bool() const { return m_ok; }
    const Error& error() const { assert(!m_ok); return m_error; }

private:
    Error m_error;
    bool m_ok = true;
};

using Status = Result<void>;

inline const char* errorCodeName(ErrorCode code)
{
    switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::ModelFileInvalid: return "invalid model file";
    case ErrorCode::UnsupportedModel: return "unsupported model";
    case ErrorCode::Io: return "I/O error";
    case ErrorCode::DiskFull: return "disk full";
    case ErrorCode::OutOfMemory: return "out of memory";
    case ErrorCode::OutOfDeviceMemory: return "out of device memory";
    case ErrorCode::DeviceLost: return "device lost";
    case ErrorCode::BackendUnavailable: return "backend unavailable";
    case ErrorCode::Cancelled: return "cancelled";
    case ErrorCode::Sql: return "database error";
    case ErrorCode::Internal: return "internal error";
    }
    return "error";
}

}  // namespace spillway

// Propagate an error from an expression returning Result<...>/Status.
#define SPILLWAY_TRY(expr)                                   \
    do {                                                     \
        auto&& spillway_try_r_ = (expr);                     \
        if (!spillway_try_r_.ok()) return spillway_try_r_.error(); \
    } while (0)
