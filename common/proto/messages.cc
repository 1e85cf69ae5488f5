#include "common/proto/messages.h"

#include <string>

namespace tandem::proto {
namespace {

struct TypeEntry {
  MessageType type;
  const google::protobuf::Message* prototype;
  const char* name;
};

const TypeEntry* Entries(size_t* count) {
  static const TypeEntry kEntries[] = {
      {MESSAGE_TYPE_HELLO, &Hello::default_instance(), "HELLO"},
      {MESSAGE_TYPE_HELLO_REPLY, &HelloReply::default_instance(), "HELLO_REPLY"},
      {MESSAGE_TYPE_ERROR, &Error::default_instance(), "ERROR"},
      {MESSAGE_TYPE_PING, &Ping::default_instance(), "PING"},
      {MESSAGE_TYPE_REGISTER, &RegisterRequest::default_instance(), "REGISTER"},
      {MESSAGE_TYPE_REGISTER_REPLY, &RegisterReply::default_instance(), "REGISTER_REPLY"},
      {MESSAGE_TYPE_HEARTBEAT, &Heartbeat::default_instance(), "HEARTBEAT"},
      {MESSAGE_TYPE_RESERVE, &ReserveRequest::default_instance(), "RESERVE"},
      {MESSAGE_TYPE_RESERVE_REPLY, &ReserveReply::default_instance(), "RESERVE_REPLY"},
      {MESSAGE_TYPE_PREFILL, &PrefillRequest::default_instance(), "PREFILL"},
      {MESSAGE_TYPE_KV_DONE, &KvDone::default_instance(), "KV_DONE"},
      {MESSAGE_TYPE_KV_CONTROL, &KvControl::default_instance(), "KV_CONTROL"},
      {MESSAGE_TYPE_TOKENS, &Tokens::default_instance(), "TOKENS"},
      {MESSAGE_TYPE_CANCEL, &Cancel::default_instance(), "CANCEL"},
      {MESSAGE_TYPE_RELEASE, &Release::default_instance(), "RELEASE"},
      {MESSAGE_TYPE_ACK, &Ack::default_instance(), "ACK"},
      {MESSAGE_TYPE_DRAIN, &Drain::default_instance(), "DRAIN"},
      {MESSAGE_TYPE_PREFILL_TARGET, &PrefillTarget::default_instance(), "PREFILL_TARGET"},
  };
  *count = sizeof(kEntries) / sizeof(kEntries[0]);
  return kEntries;
}

const TypeEntry* Find(uint32_t type) {
  size_t count = 0;
  const TypeEntry* entries = Entries(&count);
  for (size_t i = 0; i < count; ++i) {
    if (static_cast<uint32_t>(entries[i].type) == type) return &entries[i];
  }
  return nullptr;
}

}  // namespace

bool IsKnownMessageType(uint32_t type) { return Find(type) != nullptr; }

std::unique_ptr<google::protobuf::Message> NewMessage(MessageType type) {
  const TypeEntry* entry = Find(static_cast<uint32_t>(type));
  if (entry == nullptr) return nullptr;
  return std::unique_ptr<google::protobuf::Message>(entry->prototype->New());
}

MessageType TypeOf(const google::protobuf::Message& message) {
  size_t count = 0;
  const TypeEntry* entries = Entries(&count);
  for (size_t i = 0; i < count; ++i) {
    if (entries[i].prototype->GetDescriptor() == message.GetDescriptor()) return entries[i].type;
  }
  return MESSAGE_TYPE_UNSPECIFIED;
}

StatusOr<std::unique_ptr<google::protobuf::Message>> ParseMessage(MessageType type, std::string_view payload,
                                                                  size_t max_bytes) {
  if (payload.size() > max_bytes) {
    return InvalidArgumentError("control message of " + std::to_string(payload.size()) +
                                " bytes exceeds the limit of " + std::to_string(max_bytes));
  }
  std::unique_ptr<google::protobuf::Message> message = NewMessage(type);
  if (message == nullptr) {
    return InvalidArgumentError("unknown control message type " + std::to_string(static_cast<uint32_t>(type)));
  }
  // Protobuf bounds recursion depth itself (default 100); our messages nest 3 deep.
  if (!message->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return InvalidArgumentError("malformed " + MessageTypeName(type) + " message");
  }
  return message;
}

std::string MessageTypeName(uint32_t type) {
  const TypeEntry* entry = Find(type);
  if (entry == nullptr) return "UNKNOWN(" + std::to_string(type) + ")";
  return entry->name;
}

ErrorInfo ToErrorInfo(const Status& status) {
  ErrorInfo info;
  if (status.ok()) return info;
  info.set_code(static_cast<int32_t>(status.code()));
  info.set_message(status.message());
  return info;
}

Status FromErrorInfo(const ErrorInfo& info) {
  if (info.code() == 0) return Status::Ok();
  StatusCode code = StatusCode::kInternal;
  if (info.code() > 0 && info.code() <= static_cast<int32_t>(StatusCode::kInternal)) {
    code = static_cast<StatusCode>(info.code());
  }
  return Status(code, info.message());
}

}  // namespace tandem::proto
