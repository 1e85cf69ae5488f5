#include "router/api_error.h"

namespace tandem::router {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  error["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", error}};
}

std::string ApiError::ToBody() const { return DumpJson(ToJson()); }

ApiError BadRequest(std::string message, std::string param, std::string code) {
  ApiError error;
  error.http_status = 400;
  error.message = std::move(message);
  error.param = std::move(param);
  error.code = std::move(code);
  return error;
}

ApiError ApiErrorFromStatus(const Status& status, std::string param) {
  ApiError error;
  error.message = status.message().empty() ? std::string(StatusCodeName(status.code())) : status.message();
  error.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnimplemented: error.http_status = 400; break;
    case StatusCode::kNotFound: error.http_status = 404; break;
    case StatusCode::kPermissionDenied: error.http_status = 403; break;
    case StatusCode::kResourceExhausted:
      error.http_status = 429;
      error.type = "rate_limit_error";
      error.code = "rate_limit_exceeded";
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      error.http_status = 503;
      error.type = "server_error";
      break;
    case StatusCode::kDeadlineExceeded:
      error.http_status = 504;
      error.type = "server_error";
      error.code = "timeout";
      break;
    default:
      error.http_status = 500;
      error.type = "server_error";
      break;
  }
  return error;
}

ApiError ApiErrorAfterOutput(const Status& status) {
  ApiError error = ApiErrorFromStatus(status);
  if (status.code() == StatusCode::kResourceExhausted) {
    error.http_status = 500;
    error.type = "server_error";
    error.code.clear();
  }
  return error;
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tandem::router
