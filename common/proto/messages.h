// Helpers around the generated control messages (control.pb.h): the mapping
// between a frame's MessageType and its protobuf class, bounded parsing, and
// Status <-> ErrorInfo conversion.
//
// Thread rule: free functions over values; thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/base/status.h"
#include "common/proto/control.pb.h"

namespace tandem::proto {

// The wire protocol version this build speaks (the frame header's version byte).
inline constexpr uint32_t kProtocolVersion = PROTOCOL_VERSION;

// True when `type` is a MessageType this build knows (not UNSPECIFIED).
bool IsKnownMessageType(uint32_t type);

// A new, empty message of the class `type` carries; nullptr for an unknown type.
std::unique_ptr<google::protobuf::Message> NewMessage(MessageType type);

// The MessageType of a message's class; MESSAGE_TYPE_UNSPECIFIED when the class
// is not part of the control protocol.
MessageType TypeOf(const google::protobuf::Message& message);

// `message` as a T when it is one, else nullptr:
//   if (const auto* reserve = MessageAs<ReserveRequest>(*message)) { ... }
template <typename T>
const T* MessageAs(const google::protobuf::Message& message) {
  return message.GetDescriptor() == T::descriptor() ? static_cast<const T*>(&message) : nullptr;
}

// Parses `payload` as the class of `type`. InvalidArgument for an unknown type,
// a payload larger than max_bytes, or bytes that are not a valid message.
StatusOr<std::unique_ptr<google::protobuf::Message>> ParseMessage(MessageType type, std::string_view payload,
                                                                  size_t max_bytes);

// A short name for logs: "RESERVE", "TOKENS", or "UNKNOWN(<n>)".
std::string MessageTypeName(uint32_t type);

// Status -> ErrorInfo (code 0 and empty message for OK).
ErrorInfo ToErrorInfo(const Status& status);
// ErrorInfo -> Status. A code outside tandem::StatusCode becomes kInternal.
Status FromErrorInfo(const ErrorInfo& info);

}  // namespace tandem::proto
