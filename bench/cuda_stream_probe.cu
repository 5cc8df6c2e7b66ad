// Can a persistent decode kernel stream the weights of a dense 8B step at >= 70% of the copy
// rate while the step's small operations wait on each other? A probe for issue 8's roofline
// (docs/BENCHMARKS.md, session 21), the question session 19's cuda_layer_probe.cu left: every
// separate small kernel adds its own latency to the step, and a persistent kernel whose warps
// load their own rows was slower than the launches.
//
// Here one block per multiprocessor walks all 128 Q4_K products of the step (cuda_probe_
// weights.cuh) over a contiguous share of each product's rows. One producer thread copies the
// block's rows into a ring of shared-memory slots with bulk copies (`cp.async.bulk`, completion
// on an mbarrier per slot), as far ahead as the ring allows — across product boundaries, since
// weights never depend on activations. The consumer warps multiply each slot's rows with the
// backend's Q4_K piece arithmetic (in fewer instructions, same bits) and hand the slot back.
// Dependent mode: before product i the consumers of every block wait until all blocks have
// finished product i - 1 (a counter per product), then spin for a "gap" standing for the small
// operations between the two products (norm, attention, GLU), while the producer keeps filling
// the ring. Chained mode: each product its own launch (ring_product), in a graph of dependent
// launches with a small kernel after each product, against the backend's int8_matvec_kernel.
// Printed: whether the consumers' outputs are the backend kernel's bits (the run stops if not),
// then ms per step and % of the copy rate, per configuration.
// Built with the CUDA backend (bench/CMakeLists.txt); run on the GPU machine:
//   build/bench/cuda_stream_probe [steps]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_probe_weights.cuh"

namespace stream_probe {

using namespace probe;

// Gaps in ns before each kind of product (q+k+v after the attention norm, o after the
// attention, gate+up after the FFN norm, down after the GLU); < 0 in [0]: no dependency at all.
struct StreamParams {
  const Matrix* step;
  int n_products;
  int n_slots;
  int64_t slot_bytes;
  unsigned* done;       // [n_products]: blocks that finished the product, over all launches
  unsigned generation;  // launches before this one
  int64_t gap_ns[kProducts];
  bool multiply;  // false: the consumers only hand each slot back (the ring's own rate)
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void barrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count));
}
__device__ __forceinline__ void barrier_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}
__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar))
      : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// This block's rows of product m, and how many rows one slot carries (at least one).
struct Share {
  int64_t first, end, rows_per_slot;
};
__device__ __forceinline__ Share share_of(const Matrix& m, int64_t slot_bytes) {
  Share s;
  s.first = m.n_rows * blockIdx.x / gridDim.x;
  s.end = m.n_rows * (blockIdx.x + 1) / gridDim.x;
  s.rows_per_slot = max(int64_t(1), slot_bytes / m.row_bytes);
  return s;
}

// The Q4_K x Q8_K piece of the backend's decode product (Int8Piece<Q4_K>, quant_int8_matvec.cuh:
// lane L takes 16 quant bytes, piece L % 8, of super-blocks L / 8, L / 8 + 4, ...), read from
// shared memory, with fewer instructions for the same integers and float steps (so the same
// bits: main() checks every output against the backend's kernel): the lane's sub-block pair c
// never changes, so the head's 6-bit fields come out through masks chosen once per lane instead
// of both forms and a select; scales and minimums are picked (the minimums broadcast to four
// bytes) by one byte permute each; the high nibbles are multiplied in place (x & 0xf0, 16 times
// the nibble, as unsigned bytes) and the sum shifted back once. ncu counted ~105 instructions a
// warp per 512 weight bytes in the backend's kernel; the backend's own piece in this consumer
// streamed at 79% of the copy rate, this one at 88% (docs/BENCHMARKS.md, session 21).
struct LanePiece {
  int c, h;
  uint32_t shift_yz, mask_yz, mask_w;     // scales = ((y >> shift_yz) & mask_yz) | (w & mask_w)
  uint32_t pick0, pick1, bcast0, bcast1;  // __byte_perm selectors
};
__device__ __forceinline__ LanePiece lane_piece() {
  LanePiece p;
  const int piece = threadIdx.x % 8;
  p.c = piece / 2, p.h = piece % 2;
  p.shift_yz = p.c < 2 ? 0 : 2;
  p.mask_yz = p.c < 2 ? 0x3f3f3f3fu : 0x30303030u;
  p.mask_w = p.c < 2 ? 0u : 0x0f0f0f0fu;
  const uint32_t k0 = 2 * (p.c % 2), k1 = k0 + 1;
  p.pick0 = 0x4440u | k0, p.pick1 = 0x4440u | k1;    // byte k, zero-extended
  p.bcast0 = k0 * 0x1111u, p.bcast1 = k1 * 0x1111u;  // byte k in all four bytes
  return p;
}
__device__ __forceinline__ int dot4x4_unsigned(const uint32_t (&w)[4], const int4& a, int acc) {
  asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(acc) : "r"(w[0]), "r"(a.x));
  asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(acc) : "r"(w[1]), "r"(a.y));
  asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(acc) : "r"(w[2]), "r"(a.z));
  asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(acc) : "r"(w[3]), "r"(a.w));
  return acc;
}
__device__ __forceinline__ float q4k_piece(const uint4& raw, const uint4& head, const LanePiece& p,
                                           const int4& a0, const int4& a1, float dx) {
  const float d = __half2float(__ushort_as_half(uint16_t(head.x & 0xffff)));
  const float dmin = __half2float(__ushort_as_half(uint16_t(head.x >> 16)));
  const uint32_t scales = ((head.y >> p.shift_yz) & p.mask_yz) | (head.w & p.mask_w);
  const uint32_t mins = ((head.z >> p.shift_yz) & p.mask_yz) | ((head.w >> 4) & p.mask_w);
  const int sc0 = int(__byte_perm(scales, 0, p.pick0)), sc1 = int(__byte_perm(scales, 0, p.pick1));
  const uint32_t m0 = __byte_perm(mins, 0, p.bcast0), m1 = __byte_perm(mins, 0, p.bcast1);
  const uint32_t min0[4] = {m0, m0, m0, m0}, min1[4] = {m1, m1, m1, m1};
  const uint32_t lo[4] = {raw.x & 0x0f0f0f0fu, raw.y & 0x0f0f0f0fu, raw.z & 0x0f0f0f0fu,
                          raw.w & 0x0f0f0f0fu};
  const uint32_t hi16[4] = {raw.x & 0xf0f0f0f0u, raw.y & 0xf0f0f0f0u, raw.z & 0xf0f0f0f0u,
                            raw.w & 0xf0f0f0f0u};
  const int isum = sc0 * dot4x4(lo, a0, 0) + sc1 * (dot4x4_unsigned(hi16, a1, 0) >> 4);
  const int imin = dot4x4(min1, a1, dot4x4(min0, a0, 0));
  return __fmul_rn(d, dx) * float(isum) - __fmul_rn(dmin, dx) * float(imin);
}

// Consumer warp `warp` multiplies its rows of one slot (rows row0 .. row0 + rows - 1 of the
// product, the slot holding them back to back): row j of the block's share goes to warp
// j % kWarps, so with slots of fewer rows than warps the warps work on several slots at once.
// (Measured slower: two rows a warp sharing their activation loads, 80% against 85%; a
// 4096-column product's activations held in registers for all its rows, 69% against 79%.)
template <int kWarps>
__device__ __forceinline__ void multiply_slot(const uint8_t* slot, const Matrix& m, const Share& s,
                                              int64_t row0, int64_t rows) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const LanePiece lp = lane_piece();
  const int nb = int(m.n_cols / 256);
  const int quant = 16 + 32 * lp.c + 16 * lp.h;  // the piece's bytes in a super-block
  const int8_t* xq = m.q.qs + 64 * lp.c + 16 * lp.h;
  const int64_t lead = row0 - s.first;
  for (int64_t r = ((warp - lead) % kWarps + kWarps) % kWarps; r < rows; r += kWarps) {
    const uint8_t* row = slot + r * m.row_bytes;
    float acc = 0.0f;
#pragma unroll 4
    for (int block = lane / 8; block < nb; block += 4) {
      const uint4 raw = *reinterpret_cast<const uint4*>(row + block * 144 + quant);
      const uint4 head = *reinterpret_cast<const uint4*>(row + block * 144);
      const int4 a0 = __ldg(reinterpret_cast<const int4*>(xq + block * 256));
      const int4 a1 = __ldg(reinterpret_cast<const int4*>(xq + block * 256 + 32));
      acc += q4k_piece(raw, head, lp, a0, a1, __ldg(m.q.d + block));
    }
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
    if (lane == 0) m.y[row0 + r] = acc;
  }
}

// The ring's barriers: full[slot] completes when the slot's copy has landed, empty[slot] when
// every consumer warp has handed it back.
struct Ring {
  uint8_t* data;
  uint64_t* full;
  uint64_t* empty;
  int n_slots;
  int64_t slot_bytes;
  __device__ uint8_t* slot(unsigned use) const { return data + (use % n_slots) * slot_bytes; }
};
template <int kWarps>
__device__ __forceinline__ void ring_init(const Ring& ring) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < ring.n_slots; ++s) {
      barrier_init(&ring.full[s], 1), barrier_init(&ring.empty[s], kWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}
// The producer's copies of share s of m; `use` counts the slots filled so far.
__device__ __forceinline__ void produce(const Ring& ring, const Matrix& m, const Share& s,
                                        unsigned& use) {
  for (int64_t row = s.first; row < s.end; row += s.rows_per_slot, ++use) {
    const int slot = int(use % ring.n_slots);
    const unsigned round = use / ring.n_slots;
    if (round > 0) barrier_wait(&ring.empty[slot], (round - 1) & 1);
    const unsigned bytes = unsigned(min(s.rows_per_slot, s.end - row) * m.row_bytes);
    barrier_expect_bytes(&ring.full[slot], bytes);
    bulk_copy(ring.slot(use), m.w + row * m.row_bytes, bytes, &ring.full[slot]);
  }
}
// The consumers' side of the same share.
template <int kWarps>
__device__ __forceinline__ void consume(const Ring& ring, const Matrix& m, const Share& s,
                                        bool multiply, unsigned& use) {
  for (int64_t row0 = s.first; row0 < s.end; row0 += s.rows_per_slot, ++use) {
    const int slot = int(use % ring.n_slots);
    barrier_wait(&ring.full[slot], (use / ring.n_slots) & 1);
    if (multiply) {
      multiply_slot<kWarps>(ring.slot(use), m, s, row0, min(s.rows_per_slot, s.end - row0));
    }
    __syncwarp();
    if (threadIdx.x % 32 == 0) barrier_arrive(&ring.empty[slot]);
  }
}

template <int kWarps>
__global__ void __launch_bounds__(32 * (kWarps + 1), 1) streamed_step(StreamParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t ring_data[];
  __shared__ uint64_t full[16], empty[16];
  const Ring ring{ring_data, full, empty, p.n_slots, p.slot_bytes};
  ring_init<kWarps>(ring);
  unsigned use = 0;
  if (threadIdx.x / 32 == kWarps) {  // the producer
    if (threadIdx.x % 32 != 0) return;
    for (int i = 0; i < p.n_products; ++i) {
      produce(ring, p.step[i], share_of(p.step[i], p.slot_bytes), use);
    }
    return;
  }
  const unsigned target = (p.generation + 1) * gridDim.x;
  for (int i = 0; i < p.n_products; ++i) {
    const Matrix m = p.step[i];
    if (p.gap_ns[0] >= 0 && i > 0) {
      if (threadIdx.x == 0) {
        while (load_acquire(&p.done[i - 1]) < target) {
        }
        const uint64_t t0 = now_ns();
        while (now_ns() - t0 < uint64_t(p.gap_ns[i % kProducts])) {
        }
      }
      asm volatile("bar.sync 1, %0;" ::"r"(32 * kWarps) : "memory");
    }
    consume<kWarps>(ring, m, share_of(m, p.slot_bytes), p.multiply, use);
    if (p.gap_ns[0] >= 0) {  // this block's share of product i is written
      // As a grid barrier does it: the block's threads meet, then one fence and one add.
      asm volatile("bar.sync 1, %0;" ::"r"(32 * kWarps) : "memory");
      if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(&p.done[i], 1u);
      }
    }
  }
#endif
}

// One product as its own launch, chained as the backend chains its kernels: the producer's
// first copies go out before griddepcontrol.wait (weights never depend on the kernel ahead, so
// they can arrive while it still runs); only the consumers, which read the activations, wait.
template <int kWarps>
__global__ void __launch_bounds__(32 * (kWarps + 1), kWarps <= 8 ? 2 : 1)
    ring_product(Matrix m, int n_slots, int64_t slot_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t ring_data[];
  __shared__ uint64_t full[16], empty[16];
  const Ring ring{ring_data, full, empty, n_slots, slot_bytes};
  ring_init<kWarps>(ring);
  const Share s = share_of(m, slot_bytes);
  unsigned use = 0;
  if (threadIdx.x / 32 == kWarps) {
    if (threadIdx.x % 32 == 0) produce(ring, m, s, use);
    return;
  }
  wait_for_prerequisite();
  consume<kWarps>(ring, m, s, true, use);
  allow_dependent_launch();
#endif
}

}  // namespace stream_probe

int main(int argc, char** argv) {
  using namespace stream_probe;
  const int steps = steps_argument(argc, argv, "cuda_stream_probe");
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), "device");
  if (major < 9) {
    std::fprintf(stderr, "cuda_stream_probe: needs compute capability 9.0 (bulk copies)\n");
    return 2;
  }
  int64_t weight_bytes = 0;
  const std::vector<Matrix> step = make_step(&weight_bytes);
  Matrix* d_step = nullptr;
  check(cudaMalloc(&d_step, step.size() * sizeof(Matrix)), "product list");
  check(cudaMemcpy(d_step, step.data(), step.size() * sizeof(Matrix), cudaMemcpyHostToDevice),
        "product list");
  unsigned* done = nullptr;
  check(cudaMalloc(&done, step.size() * sizeof(unsigned)), "counters");

  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  const double copy_gbps = copy_rate_gbps(stream, steps);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::printf("weights %.1f MB per step, copy %.0f GB/s, %d steps each, %d blocks\n",
              weight_bytes / 1e6, copy_gbps, steps, sms);

  const auto run = [&](auto kernel, int warps, int n_slots, int slot_kb, bool multiply,
                       const char* gaps_name, const int64_t(&gaps)[kProducts]) {
    StreamParams p{};
    p.step = d_step, p.n_products = int(step.size()), p.n_slots = n_slots;
    p.slot_bytes = int64_t(slot_kb) * 1024, p.done = done, p.multiply = multiply;
    for (int k = 0; k < kProducts; ++k) p.gap_ns[k] = gaps[k];
    const size_t shared = size_t(n_slots) * size_t(p.slot_bytes);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)),
          "shared memory size");
    check(cudaMemset(done, 0, step.size() * sizeof(unsigned)), "counters");
    unsigned generation = 0;
    const double ms = time_ms(stream, steps, [&] {
      p.generation = generation++;
      void* args[] = {&p};
      check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), dim3(unsigned(sms)),
                                        dim3(unsigned(32 * (warps + 1))), args, shared, stream),
            "launch");
    });
    const double gbps = weight_bytes / ms / 1e6;
    std::printf(
        "%2d warps %2d x %2d KB slots %-8s %-26s %7.3f ms/step %7.0f GB/s %5.1f%% of copy\n", warps,
        n_slots, slot_kb, multiply ? "" : "no math", gaps_name, ms, gbps, 100.0 * gbps / copy_gbps);
  };
  const int64_t free_run[kProducts] = {-1, 0, 0, 0};
  const int64_t no_gap[kProducts] = {0, 0, 0, 0};
  const int64_t gap1[kProducts] = {1000, 1000, 1000, 1000};
  // A decode step's small operations as session 19 measured them on the critical path: norm
  // 1.7 us before q+k+v and gate+up; attention inputs + attention + merge + o quantize ~15 us
  // before o; GLU + quantize 1.7 us before down.
  const int64_t step_like[kProducts] = {1700, 15000, 1700, 1700};

  // Chained launches in a graph, a small kernel after each product (none, norm-shaped, spins).
  float* small_out = nullptr;
  check(cudaMalloc(&small_out, 4096 * sizeof(float)), "small kernel output");
  const auto chained = [&](const char* name, auto&& launch_product, int64_t spin_ns) {
    const double ms = graph_time_ms(stream, steps, [&] {
      for (const Matrix& m : step) {
        launch_product(m);
        if (spin_ns >= 0) {
          check(launch_dependent(small_kernel, dim3(1), dim3(256), 0, stream, true,
                                 static_cast<const float*>(m.y), small_out, spin_ns,
                                 static_cast<uint64_t*>(nullptr)),
                "small launch");
        }
      }
    });
    const double gbps = weight_bytes / ms / 1e6;
    std::printf("chained %-28s small kernel %-6s %7.3f ms/step %7.0f GB/s %5.1f%% of copy\n", name,
                spin_ns < 0       ? "none"
                : spin_ns == 0    ? "norm"
                : spin_ns == 3000 ? "3 us"
                                  : "10 us",
                ms, gbps, 100.0 * gbps / copy_gbps);
  };
  const auto plain = [&](const Matrix& m) {  // the backend's own decode product kernel
    ProductList list{};
    list.w[0] = m.w, list.y[0] = m.y, list.n_rows[0] = m.n_rows, list.n = 1;
    list.first_block[1] = unsigned((m.n_rows + kInt8RowsPerBlock - 1) / kInt8RowsPerBlock);
    check(launch_dependent(int8_matvec_kernel<kType, 1>, dim3(list.first_block[1]),
                           dim3(kInt8Threads), 0, stream, true, list, m.row_bytes, m.q, m.n_cols),
          "product launch");
  };
  const auto ring_of = [&](auto kernel, int warps, int n_slots, int slot_kb, int blocks) {
    const int64_t slot_bytes = int64_t(slot_kb) * 1024;
    const size_t shared = size_t(n_slots) * size_t(slot_bytes);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)),
          "shared memory size");
    return [=](const Matrix& m) {
      check(launch_dependent(kernel, dim3(unsigned(blocks)), dim3(unsigned(32 * (warps + 1))),
                             shared, stream, true, m, n_slots, slot_bytes),
            "ring product launch");
    };
  };
  // The ring only for the products of 30 MB and more (gate+up, down), the plain kernel for the
  // rest.
  const auto large = [&](auto ring) {
    return [=](const Matrix& m) {
      if (m.n_rows * m.row_bytes >= 30000000) return ring(m);
      plain(m);
    };
  };
  // The consumers' bits against the backend's kernel: every output of one step.
  const auto outputs = [&] {
    std::vector<float> all;
    for (const Matrix& m : step) {
      std::vector<float> y(size_t(m.n_rows));
      check(cudaMemcpy(y.data(), m.y, y.size() * sizeof(float), cudaMemcpyDeviceToHost), "y");
      all.insert(all.end(), y.begin(), y.end());
    }
    return all;
  };
  chained("plain (int8_matvec_kernel)", plain, -1);
  const std::vector<float> reference = outputs();
  run(streamed_step<16>, 16, 6, 32, true, "no dependency", free_run);
  const std::vector<float> streamed = outputs();
  size_t differ = 0;
  for (size_t k = 0; k < streamed.size(); ++k) {
    differ += std::memcmp(&streamed[k], &reference[k], sizeof(float)) != 0;
  }
  std::printf("%zu of %zu outputs differ from the backend kernel's bits\n", differ,
              streamed.size());
  if (differ != 0) return 1;
  for (int round = 0; round < 2; ++round) {
    for (const int64_t spin : {int64_t(-1), int64_t(0), int64_t(3000), int64_t(10000)}) {
      chained("plain (int8_matvec_kernel)", plain, spin);
      chained("ring 16 warps 6 x 32 KB", ring_of(ring_product<16>, 16, 6, 32, sms), spin);
      if (spin == 10000) continue;
      chained("ring >= 30 MB, 16 w 6 x 32 KB", large(ring_of(ring_product<16>, 16, 6, 32, sms)),
              spin);
      chained("ring >= 30 MB, 2 x 8 w 3 x 32 KB",
              large(ring_of(ring_product<8>, 8, 3, 32, 2 * sms)), spin);
    }
    run(streamed_step<8>, 8, 6, 32, false, "no dependency", free_run);
    run(streamed_step<8>, 8, 6, 32, false, "dependent, no gap", no_gap);
    run(streamed_step<16>, 16, 6, 32, true, "no dependency", free_run);
    run(streamed_step<16>, 16, 6, 32, true, "dependent, no gap", no_gap);
    run(streamed_step<16>, 16, 6, 32, true, "dependent, 1 us gaps", gap1);
    run(streamed_step<16>, 16, 6, 32, true, "dependent, step-like gaps", step_like);
  }
  return 0;
}
