// load_bench: how long a model directory takes to load onto a backend, by phase.
//
//   load_bench --model DIR [--backend cpu|cuda] [--threads 4] [--chunk-mb 16] [--kv-gb 8] [--engine]
//
// Prints the page cache's state before the load (mincore over the safetensors maps:
// run it twice, the second run sees a warm cache), then a table: backend creation,
// opening the checkpoint (mmap, headers), the weight upload (its fill, allocation and
// the rest: waiting on copies), the final sync, a device KV pool of --kv-gb, and the
// total; then the ceilings measured in the same run, after the load: the page-cache
// read rate of the checkpoint with the same threads, and (CUDA) a pinned 1 GiB
// host-to-device copy. --engine instead times Engine::Create, the path a node takes
// at start-up (its progress and summary lines included).
#include <CLI/CLI.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/base/logging.h"
#include "common/engine/backend_factory.h"
#include "common/engine/engine.h"
#include "common/model/mapped_file.h"
#include "common/model/model_config.h"
#include "common/model/weights.h"
#include "common/runtime/cpu_backend.h"
#include "common/runtime/llama_model.h"
#include "common/runtime/llama_weights.h"
#include "common/runtime/paged_kv_cache.h"
#ifdef TANDEM_LOAD_BENCH_CUDA
#include <cuda_runtime_api.h>

#include "common/runtime/cuda_backend.h"
#endif

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Flags {
  std::string model;
  std::string backend =
#ifdef TANDEM_LOAD_BENCH_CUDA
      "cuda";
#else
      "cpu";
#endif
  int device = 0;
  int threads = 4;
  int chunk_mb = 16;
  double kv_gb = 8;
  bool engine = false;
};

std::vector<std::string> SafetensorsFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Bytes of `files` and how many of them are in the page cache (mincore on fresh maps;
// Linux answers for files the caller owns or may write, otherwise it counts only pages
// this process mapped: none).
StatusOr<std::pair<double, double>> PageCacheState(const std::vector<std::string>& files) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  double total = 0, resident = 0;
  for (const std::string& path : files) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<model::MappedFile> map, model::MappedFile::Open(path));
    std::vector<unsigned char> in_core((map->size() + page - 1) / page);
    if (map->size() > 0 && ::mincore(const_cast<std::byte*>(map->data()), map->size(), in_core.data()) != 0) {
      return UnavailableError(path + ": mincore: " + std::strerror(errno));
    }
    total += static_cast<double>(map->size());
    for (unsigned char c : in_core) resident += (c & 1) ? static_cast<double>(page) : 0;
  }
  return std::make_pair(total, std::min(resident, total));
}

// Seconds to read every byte of `files` through fresh maps with `threads` threads
// (16 MiB pieces, memcpy into a per-thread buffer): the fill's ceiling.
StatusOr<double> ReadSeconds(const std::vector<std::string>& files, int threads) {
  std::vector<std::unique_ptr<model::MappedFile>> maps;
  for (const std::string& path : files) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<model::MappedFile> map, model::MappedFile::Open(path));
    maps.push_back(std::move(map));
  }
  constexpr size_t kPiece = 16 << 20;
  std::vector<std::pair<const std::byte*, size_t>> pieces;
  for (const auto& map : maps) {
    for (size_t at = 0; at < map->size(); at += kPiece) {
      pieces.emplace_back(map->data() + at, std::min(kPiece, map->size() - at));
    }
  }
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::byte> buffer(kPiece);
      for (size_t i = t; i < pieces.size(); i += threads) std::memcpy(buffer.data(), pieces[i].first, pieces[i].second);
    });
  }
  for (std::thread& t : pool) t.join();
  return Since(start);
}

#ifdef TANDEM_LOAD_BENCH_CUDA
// GB/s of one pinned 1 GiB host-to-device copy (best of three).
StatusOr<double> PinnedH2DRate(int device) {
  constexpr size_t kBytes = size_t{1} << 30;
  void *host = nullptr, *dev = nullptr;
  if (cudaSetDevice(device) != cudaSuccess || cudaHostAlloc(&host, kBytes, cudaHostAllocDefault) != cudaSuccess ||
      cudaMalloc(&dev, kBytes) != cudaSuccess) {
    return UnavailableError("pinned copy ceiling: CUDA allocation failed");
  }
  std::memset(host, 1, kBytes);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const Clock::time_point start = Clock::now();
    cudaMemcpy(dev, host, kBytes, cudaMemcpyHostToDevice);
    best = std::min(best, Since(start));
  }
  cudaFree(dev);
  cudaFreeHost(host);
  return kBytes / 1e9 / best;
}
#endif

StatusOr<std::unique_ptr<runtime::Backend>> CreateBackend(const Flags& f) {
#ifdef TANDEM_LOAD_BENCH_CUDA
  if (f.backend == "cuda") {
    runtime::CudaBackendOptions options;
    options.device = f.device;
    options.upload_chunk_bytes = static_cast<size_t>(f.chunk_mb) << 20;
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CudaBackend> backend, runtime::CudaBackend::Create(options));
    return std::unique_ptr<runtime::Backend>(std::move(backend));
  }
#endif
  return engine::MakeBackend(f.backend, f.device);
}

// Waits for every queued copy (CopyToHost waits for the ops before it).
Status Sync(runtime::Backend* backend, const runtime::Tensor& any) {
  std::vector<std::byte> sink(any.NumBytes());
  return backend->CopyToHost(any, sink.data(), sink.size());
}

void Row(const char* phase, double seconds, double gb = 0) {
  if (gb > 0) {
    std::printf("| %-56s | %8.3f | %7.2f | %7.2f |\n", phase, seconds, gb, seconds > 0 ? gb / seconds : 0.0);
  } else {
    std::printf("| %-56s | %8.3f |         |         |\n", phase, seconds);
  }
}

Status Run(const Flags& f) {
  TANDEM_RETURN_IF_ERROR(InitLogging("info"));
  const std::vector<std::string> files = SafetensorsFiles(f.model);
  if (files.empty()) return NotFoundError(f.model + ": no .safetensors files");
  TANDEM_ASSIGN_OR_RETURN(auto cache, PageCacheState(files));
  std::printf("load_bench: %s onto %s (device %d), %d fill threads (of %u hardware threads), %d MiB chunks (CUDA)\n",
              f.model.c_str(), f.backend.c_str(), f.device, f.threads, std::thread::hardware_concurrency(), f.chunk_mb);
  std::printf(
      "page cache before the load: %.1f %% of %.2f GB resident (%s). Run it twice: the second run sees a "
      "warm cache; a cold one needs `sync; echo 3 | sudo tee /proc/sys/vm/drop_caches` first.\n",
      100.0 * cache.second / cache.first, cache.first / 1e9,
      cache.second >= 0.99 * cache.first  ? "warm"
      : cache.second < 0.01 * cache.first ? "cold"
                                          : "partly warm");
  const Clock::time_point start = Clock::now();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Backend> backend, CreateBackend(f));
  const double backend_s = Since(start);

  std::printf("\n| phase | s | GB | GB/s |\n|---|---|---|---|\n");
  Row("backend create (context, cuBLAS)", backend_s);
  if (f.engine) {
    engine::EngineConfig config;
    config.model_dir = f.model;
    config.backend = f.backend;
    config.kv_cache_bytes = static_cast<int64_t>(f.kv_gb * 1e9);
    const Clock::time_point engine_start = Clock::now();
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> engine, engine::Engine::Create(config, std::move(backend)));
    Row("Engine::Create (weights, workspace, KV pool, host tier)", Since(engine_start));
    Row("total", Since(start));
    return Status::Ok();
  }
  const Clock::time_point open_start = Clock::now();
  TANDEM_ASSIGN_OR_RETURN(model::ModelConfig config, model::LoadModelConfig(f.model));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelWeights> weights, model::ModelWeights::Open(f.model));
  Row("open (config, mmap, headers)", Since(open_start));
  runtime::WeightUploadStats stats;
  TANDEM_ASSIGN_OR_RETURN(
      runtime::LlamaWeights loaded,
      runtime::LlamaWeights::Load(config, *weights, backend.get(), {.num_threads = f.threads}, &stats));
  Row("weights upload", stats.seconds, stats.bytes / 1e9);
  Row("  filling host chunks (reads, conversions)", stats.fill_seconds);
  Row("  allocating device tensors", stats.allocate_seconds);
  Row("  the rest (waiting for copies, checks)", stats.seconds - stats.fill_seconds - stats.allocate_seconds);
  const Clock::time_point sync_start = Clock::now();
  TANDEM_RETURN_IF_ERROR(Sync(backend.get(), loaded.final_norm.tensor()));
  Row("final sync (last copies)", Since(sync_start));
  if (f.kv_gb > 0) {
    kv_cache::KvLayout layout = runtime::KvLayoutForModel(config, 16, 1, backend->compute_dtype());
    layout.num_blocks = std::max(1, static_cast<int>(f.kv_gb * 1e9 / static_cast<double>(layout.TotalBytes())));
    const Clock::time_point kv_start = Clock::now();
    TANDEM_ASSIGN_OR_RETURN(runtime::PagedKvCache pool, runtime::PagedKvCache::Create(backend.get(), layout));
    TANDEM_RETURN_IF_ERROR(Sync(backend.get(), loaded.final_norm.tensor()));  // the zeroing too
    const std::string what = "device KV pool (" + std::to_string(layout.num_blocks) + " blocks of 16, zeroed)";
    Row(what.c_str(), Since(kv_start), layout.TotalBytes() / 1e9);
  }
  Row("total", Since(start));
  std::printf("\nsummary: %.2f GB of weights in %.3f s = %.2f GB/s (%.2f GB converted); start to ready %.3f s\n",
              stats.bytes / 1e9, stats.seconds, stats.bytes / 1e9 / stats.seconds, stats.converted_bytes / 1e9,
              Since(start));

  std::printf("\nceilings, same run, after the load:\n");
  TANDEM_ASSIGN_OR_RETURN(double read_s, ReadSeconds(files, f.threads));
  std::printf("  page-cache read of the checkpoint, %d threads: %.2f GB in %.3f s = %.2f GB/s\n", f.threads,
              cache.first / 1e9, read_s, cache.first / 1e9 / read_s);
#ifdef TANDEM_LOAD_BENCH_CUDA
  if (f.backend == "cuda") {
    TANDEM_ASSIGN_OR_RETURN(double h2d, PinnedH2DRate(f.device));
    std::printf("  pinned host-to-device copy, 1 GiB: %.2f GB/s\n", h2d);
  }
#endif
  return Status::Ok();
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // the table's lines in order with the log's (stderr)
  tandem::Flags f;
  CLI::App app{"load_bench: a model directory's load onto a backend, by phase"};
  app.add_option("--model", f.model, "Model directory (config.json, safetensors)")->required();
  app.add_option("--backend", f.backend, "cpu|cuda")->capture_default_str();
  app.add_option("--device", f.device, "CUDA device")->capture_default_str();
  app.add_option("--threads", f.threads, "Fill threads (WeightUploadOptions::num_threads)")->capture_default_str();
  app.add_option("--chunk-mb", f.chunk_mb, "CUDA upload chunk (CudaBackendOptions::upload_chunk_bytes), MiB")
      ->capture_default_str();
  app.add_option("--kv-gb", f.kv_gb, "Device KV pool to allocate after the weights (0: none)")->capture_default_str();
  app.add_flag("--engine", f.engine, "Time Engine::Create (a node's start-up) instead of the phases");
  CLI11_PARSE(app, argc, argv);
  tandem::Status status = tandem::Run(f);
  if (!status.ok()) {
    std::fprintf(stderr, "load_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
