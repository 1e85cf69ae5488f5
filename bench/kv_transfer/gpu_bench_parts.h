// The parts of kv_transfer_gpu_bench that live in gpu_bench_two_gpu.cc.
#pragma once

#include <string>
#include <vector>

#include "bench/kv_transfer/gpu_bench_util.h"

namespace tandem::bench {

// The target side of the raw transfers (this binary re-executed with --child
// raw): a transport with a device region of `bytes` on `device`.
int RunRawChild(const std::string& backend, int device, uint64_t bytes);
// GPU 0 -> GPU 1 over cuda_ipc (this process writes into the child's memory) vs
// cudaMemcpyPeerAsync, 1..512 MiB, contiguous and scattered 64 KiB pieces.
void TwoGpuCudaIpc(int reps, std::vector<Row>* rows);
// GPU 0 -> GPU 1 over the nccl transport vs raw ncclSend/ncclRecv of the same
// bytes (skipped with a message when the build has no NCCL).
void TwoGpuNccl(int reps, std::vector<Row>* rows);

// The receiving side of the host-staged UCX benchmark (this binary re-executed
// with --child staged <ucx transports>).
int RunStagedChild(const std::string& ucx_transports);
// Host-staged UCX over shared memory between two processes on GPU 0: D2H -> UCX
// put -> H2D pipelined across a 4K prompt's layers, against its slowest hop (the
// put alone measured here; pinned D2H and H2D given). Built only with UCX.
void StagedUcx(int reps, double d2h, double h2d, std::vector<Row>* rows);

}  // namespace tandem::bench
