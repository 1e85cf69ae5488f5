#include "tests/common/scheduler/fake_engine.h"

#include <cstring>

#include <fmt/format.h>

namespace tandem::scheduler::testing {

using kv_cache::KvTier;

FakeEngine::FakeEngine(Scheduler* sched) : sched_(sched) {
  const auto& kv = sched->kv().config();
  kv_cache::KvLayout layout;
  layout.num_layers = 2;
  layout.num_kv_heads = 1;
  layout.head_dim = 2;  // one row = 8 bytes = one uint64
  layout.block_size = kv.block_size;
  layout.dtype = DType::kF32;
  auto storage = kv_cache::CpuKvTierStorage::Create(layout, kv.num_device_blocks, kv.num_host_blocks);
  TANDEM_CHECK_OK(storage.status());
  storage_ = std::move(storage).value();
}

uint64_t FakeEngine::Seed(const std::string& salt) {
  uint64_t h = 1469598103934665603ull;
  for (char c : salt) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

uint64_t FakeEngine::Mix(uint64_t prev, TokenId token) {
  uint64_t x = prev ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) + 0x9e3779b97f4a7c15ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

uint64_t FakeEngine::ReadSlot(BlockId block, int slot, int layer, int kv) const {
  const auto& layout = storage_->layout(KvTier::kDevice);
  uint64_t v;
  std::memcpy(&v, storage_->data(KvTier::kDevice) + 4 * layout.ElementOffset(layer, block, kv, 0, slot), 8);
  return v;
}

void FakeEngine::WriteSlot(BlockId block, int slot, uint64_t value) {
  const auto& layout = storage_->layout(KvTier::kDevice);
  for (int layer = 0; layer < layout.num_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      uint64_t v = kv == 0 ? value : ~value + static_cast<uint64_t>(layer);
      std::memcpy(storage_->data(KvTier::kDevice) + 4 * layout.ElementOffset(layer, block, kv, 0, slot), &v, 8);
    }
  }
}

StatusOr<uint64_t> FakeEngine::VerifyAndWrite(const Sequence& seq, std::span<const BlockId> table, int verify_end,
                                              int end) {
  const int bs = sched_->kv().config().block_size;
  const auto& pool = sched_->kv().pool(KvTier::kDevice);
  if (static_cast<int>(table.size()) * bs < end) {
    return InternalError(fmt::format("request {}: table of {} blocks for {} tokens", seq.params.id, table.size(), end));
  }
  uint64_t h = Seed(seq.params.tenant_salt);
  for (int p = 0; p < end; ++p) {
    h = Mix(h, seq.tokens[p]);
    BlockId block = table[p / bs];
    if (p < verify_end) {
      for (int layer = 0; layer < 2; ++layer) {
        if (ReadSlot(block, p % bs, layer, 0) != h || ReadSlot(block, p % bs, layer, 1) != ~h + layer) {
          return InternalError(fmt::format("request {}: KV mismatch at position {} (block {}, layer {})", seq.params.id,
                                           p, block, layer));
        }
      }
      ++num_verified_;
    } else {
      if (pool.RefCount(block) != 1 || pool.HasHash(block)) {
        return InternalError(fmt::format("request {}: writing block {} with refcount {} hashed {}", seq.params.id,
                                         block, pool.RefCount(block), pool.HasHash(block)));
      }
      WriteSlot(block, p % bs, h);
    }
  }
  return h;
}

Status FakeEngine::VerifyBlocks(const std::string& salt, std::span<const TokenId> tokens,
                                std::span<const BlockId> table) const {
  const int bs = sched_->kv().config().block_size;
  if (table.size() * static_cast<size_t>(bs) < tokens.size()) {
    return InternalError(fmt::format("table of {} blocks for {} tokens", table.size(), tokens.size()));
  }
  uint64_t h = Seed(salt);
  for (size_t p = 0; p < tokens.size(); ++p) {
    h = Mix(h, tokens[p]);
    BlockId block = table[p / bs];
    if (ReadSlot(block, static_cast<int>(p % bs), 0, 0) != h) {
      return InternalError(fmt::format("KV mismatch at position {} (block {})", p, block));
    }
  }
  return Status::Ok();
}

Status FakeEngine::Append(RequestId id, TokenId token) {
  generated_[id].push_back(token);
  auto r = sched_->AppendToken(id, token);
  return r.status();
}

Status FakeEngine::Step(SchedulerOutput* out_copy) {
  scheduled_.clear();
  SchedulerOutput out = sched_->Schedule();
  finished_.insert(finished_.end(), out.finished.begin(), out.finished.end());
  TANDEM_RETURN_IF_ERROR(storage_->ExecuteCopies(out.copies));
  std::vector<std::pair<RequestId, TokenId>> samples;
  for (const ScheduledSequence& s : out.scheduled) {
    const Sequence* seq = sched_->Find(s.id);
    if (seq == nullptr) return InternalError(fmt::format("scheduled unknown request {}", s.id));
    scheduled_.insert(s.block_table.begin(), s.block_table.end());
    TANDEM_ASSIGN_OR_RETURN(uint64_t h,
                            VerifyAndWrite(*seq, s.block_table, s.start_position, s.start_position + s.num_new_tokens));
    if (s.needs_logits) samples.emplace_back(s.id, SampleFrom(h));
  }
  for (auto [id, token] : samples) TANDEM_RETURN_IF_ERROR(Append(id, token));
  if (out_copy != nullptr) *out_copy = std::move(out);
  return Status::Ok();
}

StatusOr<Reservation> FakeEngine::Reserve(SequenceParams params, int64_t lease_ms) {
  auto r = sched_->Reserve(std::move(params), lease_ms);
  if (r.ok()) TANDEM_RETURN_IF_ERROR(storage_->ExecuteCopies(r->copies));
  return r;
}

Status FakeEngine::LandReservation(RequestId id, const Reservation& reservation) {
  const Sequence* seq = sched_->Find(id);
  if (seq == nullptr) return NotFoundError(fmt::format("no request {}", id));
  TANDEM_ASSIGN_OR_RETURN(uint64_t h, VerifyAndWrite(*seq, reservation.block_table, reservation.num_cached_tokens,
                                                     seq->num_prompt_tokens()));
  TokenId token = SampleFrom(h);
  generated_[id].push_back(token);
  return sched_->CompleteReservation(id, token).status();
}

}  // namespace tandem::scheduler::testing
