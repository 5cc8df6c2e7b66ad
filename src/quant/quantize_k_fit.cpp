// Super-block fitting for the K-quants: a float fit per sub-block seeds an alternating
// search, integer codes and levels given the super-scales, then the super-scales by least
// squares given the integers, until the squared error stops falling; last, the super-scales
// are rounded to fp16 and the integers re-chosen for the values actually stored.
#include "quant/quantize_k_fit.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"

namespace sluice::kquant {
namespace {

// Nearest integer level to v within [lo, hi]; NaN goes to lo so no input reaches an undefined
// float-to-int conversion.
inline int level(float v, int lo, int hi) {
  if (!(v > float(lo))) return lo;
  if (!(v < float(hi))) return hi;
  return int(std::lrintf(v));
}

// The same on floats, written so the compiler vectorises the loops below: the clamps compare
// with v second so NaN becomes lo, and adding and removing 1.5 * 2^23 rounds to nearest (ties
// to even) without a libm call; exact because |v| <= 32 after the clamps.
inline float level_f(float v, float lo, float hi) {
  constexpr float kMagic = 12582912.0f;
  v = lo < v ? v : lo;
  v = v < hi ? v : hi;
  return (v + kMagic) - kMagic;
}

// Sub-blocks are 16 or 32 floats: errors are summed in 8 independent lanes (a fixed order, so
// results do not depend on the compiler's choice to vectorise).
constexpr int kLanes = 8;

inline float lane_sum(const float* acc) {
  float total = 0;
  for (int k = 0; k < kLanes; ++k) total += acc[k];
  return total;
}

// A super-scale as stored: fp16, saturated at the largest finite half so that input too large
// for the format decodes to large values rather than infinities.
inline uint16_t to_half(float v) {
  const uint16_t h = fp32_to_fp16(v);
  return (h & 0x7fff) == 0x7c00 ? uint16_t((h & 0x8000) | 0x7bff) : h;
}

// The stored super-scale candidates for a float optimum v: its fp16 rounding and, when that is
// subnormal (a few ulps may be tens of percent of the value, and the codes cannot make up for
// a large step), the fp16 values one ulp either side too. Returns how many.
int half_candidates(float v, uint16_t out[3]) {
  const uint16_t h = to_half(v);
  int n = 0;
  out[n++] = h;
  if ((h & 0x7c00) == 0) {
    const uint16_t magnitude = h & 0x7fff, sign = v < 0 ? 0x8000 : 0;
    if (magnitude > 0) out[n++] = uint16_t(sign | (magnitude - 1));
    out[n++] = uint16_t(sign | (magnitude + 1));
  }
  return n;
}

// Iterations of the alternating search; each step can only lower the error, and in practice
// it settles in two to four.
constexpr int kMaxRounds = 8;

// ---- affine: x ~ A * q - B, A >= 0, B >= 0 --------------------------------------------------

// Squared error of one sub-block at scale A and offset B, each level rounded to nearest. The
// hot loop of the whole search.
float affine_error(const float* x, int n, int q_max, float A, float B) {
  const float inv = A > 0 ? 1.0f / A : 0.0f;
  const float hi = float(q_max);
  float acc[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float diff = A * level_f((x[i + k] + B) * inv, 0, hi) - B - x[i + k];
      acc[k] += diff * diff;
    }
  }
  return lane_sum(acc);
}

// The levels affine_error chose, and their error.
float affine_levels(const float* x, int n, int q_max, float A, float B, uint8_t* q) {
  const float inv = A > 0 ? 1.0f / A : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = uint8_t(level_f((x[i] + B) * inv, 0, float(q_max)));
  return affine_error(x, n, q_max, A, B);
}

// The offset that is best for the levels chosen at (A, B): the mean residual, kept >= 0.
float affine_offset(const float* x, int n, int q_max, float A, float B) {
  const float inv = A > 0 ? 1.0f / A : 0.0f;
  const float hi = float(q_max);
  float acc[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      acc[k] += A * level_f((x[i + k] + B) * inv, 0, hi) - x[i + k];
    }
  }
  return std::max(0.0f, lane_sum(acc) / float(n));
}

struct SubAffine {
  float a = 0, b = 0;  // float scale and offset of the sub-block's own best fit
};

// Least-squares scale and offset for fixed levels, offset kept >= 0 (what the format stores).
SubAffine affine_lsq(const float* x, int n, const uint8_t* q) {
  double sx = 0, sq = 0, sqq = 0, sxq = 0;
  for (int i = 0; i < n; ++i) {
    sx += x[i];
    sq += q[i];
    sqq += double(q[i]) * q[i];
    sxq += double(x[i]) * q[i];
  }
  const double det = n * sqq - sq * sq;
  if (det <= 0) return {0, float(std::max(0.0, -sx / n))};
  double a = (n * sxq - sx * sq) / det;
  double c = (sx - a * sq) / n;  // x ~ a q + c, so B = -c
  if (c > 0) {
    c = 0;
    a = sxq / sqq;
  }
  return {float(std::max(a, 0.0)), float(-c)};
}

// The sub-block's best float (A, B): a sweep of scales spanning [min(x, 0), max(x)] with
// slightly more or fewer steps than levels, each polished by least squares on its levels.
SubAffine fit_sub_affine(const float* x, int n, int q_max) {
  float lo = 0, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  SubAffine best{0, std::max(0.0f, -lo)};
  if (!(hi > lo)) return best;
  float best_err = affine_error(x, n, q_max, 0, best.b);
  uint8_t q[32];
  for (int step = -10; step <= 10; ++step) {
    SubAffine cur{(hi - lo) / (float(q_max) + 0.1f * float(step)), -lo};
    for (int round = 0; round < 2; ++round) {
      const float err = affine_levels(x, n, q_max, cur.a, cur.b, q);
      if (err < best_err) {
        best_err = err;
        best = cur;
      }
      cur = affine_lsq(x, n, q);
    }
    const float err = affine_error(x, n, q_max, cur.a, cur.b);
    if (err < best_err) {
      best_err = err;
      best = cur;
    }
  }
  return best;
}

// Best (scale code, min code, levels) of one sub-block for given super-scales. Scale codes
// are searched within scale_radius of both the float fit's and the previous choice (sc on
// entry), so a round never loses the code it had; for each, the offset is solved continuously
// and its two nearest min codes tried.
float assign_affine_sub(const float* x, const AffineSpec& s, const SubAffine& fit, float d,
                        float dmin, uint8_t& sc, uint8_t& mc, uint8_t* q) {
  const int n = s.sub_size;
  int lo = 0, hi = 0;  // d == 0: only code 0 means anything
  if (d > 0) {
    const int center = level(fit.a / d, 0, s.code_max);
    lo = std::max(0, std::min<int>(center, sc) - s.scale_radius);
    hi = std::min(s.code_max, std::max<int>(center, sc) + s.scale_radius);
  }
  float best_err = INFINITY;
  int best_s = 0, best_m = 0;
  for (int code = lo; code <= hi; ++code) {
    const float A = d * float(code);
    float B = fit.b;
    for (int it = 0; it < 2; ++it) B = affine_offset(x, n, s.q_max, A, B);
    int m_lo = 0, m_hi = 0;
    if (dmin > 0) {
      m_lo = level(std::floor(B / dmin), 0, s.code_max);
      m_hi = std::min(s.code_max, m_lo + 1);
    }
    for (int m = m_lo; m <= m_hi; ++m) {
      const float err = affine_error(x, n, s.q_max, A, dmin * float(m));
      if (err < best_err) {
        best_err = err;
        best_s = code;
        best_m = m;
      }
    }
  }
  sc = uint8_t(best_s);
  mc = uint8_t(best_m);
  return affine_levels(x, n, s.q_max, d * float(best_s), dmin * float(best_m), q);
}

double assign_affine(const float* x, const AffineSpec& s, const SubAffine* fits, float d,
                     float dmin, AffineFit& f) {
  double total = 0;
  for (int j = 0; j < kSuperBlock / s.sub_size; ++j) {
    const int off = j * s.sub_size;
    total += assign_affine_sub(x + off, s, fits[j], d, dmin, f.sc[j], f.mc[j], f.q + off);
  }
  return total;
}

// Least-squares (d, dmin) for fixed codes and levels: x ~ d * (sc q) - dmin * mc.
void affine_super_lsq(const float* x, const AffineSpec& s, const AffineFit& f, float& d,
                      float& dmin) {
  double suu = 0, suv = 0, svv = 0, sxu = 0, sxv = 0;
  for (int i = 0; i < kSuperBlock; ++i) {
    const int j = i / s.sub_size;
    const double u = double(f.sc[j]) * f.q[i], v = f.mc[j];
    suu += u * u;
    suv += u * v;
    svv += v * v;
    sxu += x[i] * u;
    sxv += x[i] * v;
  }
  const double det = suv * suv - suu * svv;
  if (svv > 0 && det != 0) {
    const double nd = (suv * sxv - sxu * svv) / det;
    const double nm = (suu * sxv - suv * sxu) / det;
    if (nd >= 0 && nm >= 0) {
      d = float(nd);
      dmin = float(nm);
      return;
    }
  }
  if (suu > 0) d = float(std::max(0.0, (sxu + dmin * suv) / suu));
}

}  // namespace

void fit_affine(const float* x, const AffineSpec& s, AffineFit& out) {
  const int n_sub = kSuperBlock / s.sub_size;
  SubAffine fits[kMaxSubBlocks];
  float max_a = 0, max_b = 0;
  for (int j = 0; j < n_sub; ++j) {
    fits[j] = fit_sub_affine(x + j * s.sub_size, s.sub_size, s.q_max);
    max_a = std::max(max_a, fits[j].a);
    max_b = std::max(max_b, fits[j].b);
  }
  AffineFit cur;
  float d = max_a / float(s.code_max), dmin = max_b / float(s.code_max);
  // Seed the codes at the float fits, so the first search is centred there alone.
  for (int j = 0; j < n_sub; ++j) {
    cur.sc[j] = uint8_t(d > 0 ? level(fits[j].a / d, 0, s.code_max) : 0);
  }
  double err = assign_affine(x, s, fits, d, dmin, cur);
  for (int round = 0; round < kMaxRounds; ++round) {
    float nd = d, nm = dmin;
    affine_super_lsq(x, s, cur, nd, nm);
    AffineFit next = cur;
    const double next_err = assign_affine(x, s, fits, nd, nm, next);
    if (!(next_err < err * (1 - 1e-6))) break;
    err = next_err;
    cur = next;
    d = nd;
    dmin = nm;
  }
  // Re-choose the integers for the super-scales as stored.
  uint16_t d_opts[3], m_opts[3];
  const int nd = half_candidates(d, d_opts), nm = half_candidates(dmin, m_opts);
  double best = INFINITY;
  for (int a = 0; a < nd; ++a) {
    for (int b = 0; b < nm; ++b) {
      AffineFit trial = cur;
      const double e =
          assign_affine(x, s, fits, fp16_to_fp32(d_opts[a]), fp16_to_fp32(m_opts[b]), trial);
      if (e < best) {
        best = e;
        out = trial;
        out.d = d_opts[a];
        out.dmin = m_opts[b];
      }
    }
  }
}

// ---- symmetric: x ~ A * q, A of either sign ------------------------------------------------

namespace {

// Squared error of one sub-block at scale A, each level rounded to nearest; A == 0 (or not
// finite) codes every level 0.
float symmetric_error(const float* x, int n, int q_min, int q_max, float A) {
  const float inv = A != 0 && std::isfinite(A) ? 1.0f / A : 0.0f;
  const float lo = float(q_min), hi = float(q_max);
  float acc[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float diff = A * level_f(x[i + k] * inv, lo, hi) - x[i + k];
      acc[k] += diff * diff;
    }
  }
  return lane_sum(acc);
}

float symmetric_levels(const float* x, int n, int q_min, int q_max, float A, int8_t* q) {
  const float inv = A != 0 && std::isfinite(A) ? 1.0f / A : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = int8_t(level_f(x[i] * inv, float(q_min), float(q_max)));
  return symmetric_error(x, n, q_min, q_max, A);
}

// The sub-block's best float scale: the largest-magnitude value placed near either end of
// the (asymmetric) level range, each start polished by least squares on its levels.
float fit_sub_symmetric(const float* x, int n, int q_min, int q_max) {
  float xm = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(xm)) xm = x[i];
  }
  if (!(std::fabs(xm) > 0)) return 0;
  float best = 0, best_err = symmetric_error(x, n, q_min, q_max, 0);
  int8_t q[32];
  for (const int end : {q_min, q_max}) {
    for (int step = -9; step <= 9; ++step) {
      float a = xm / (float(end) + (end < 0 ? -0.1f : 0.1f) * float(step));
      for (int round = 0; round < 3; ++round) {
        const float err = symmetric_levels(x, n, q_min, q_max, a, q);
        if (err < best_err) {
          best_err = err;
          best = a;
        }
        double sxq = 0, sqq = 0;
        for (int i = 0; i < n; ++i) {
          sxq += double(x[i]) * q[i];
          sqq += double(q[i]) * q[i];
        }
        if (sqq == 0) break;
        a = float(sxq / sqq);
      }
    }
  }
  return best;
}

// As assign_affine_sub for the symmetric shape: the scale code only, levels rounded.
float assign_symmetric_sub(const float* x, const SymmetricSpec& s, float fit, float d, int8_t& sc,
                           int8_t* q) {
  const int n = s.sub_size;
  int lo = 0, hi = 0;
  if (d != 0) {
    const int center = level(fit / d, s.code_min, s.code_max);
    lo = std::max(s.code_min, std::min<int>(center, sc) - s.scale_radius);
    hi = std::min(s.code_max, std::max<int>(center, sc) + s.scale_radius);
  }
  float best_err = INFINITY;
  int best_s = 0;
  for (int code = lo; code <= hi; ++code) {
    const float err = symmetric_error(x, n, s.q_min, s.q_max, d * float(code));
    if (err < best_err) {
      best_err = err;
      best_s = code;
    }
  }
  sc = int8_t(best_s);
  return symmetric_levels(x, n, s.q_min, s.q_max, d * float(best_s), q);
}

double assign_symmetric(const float* x, const SymmetricSpec& s, const float* fits, float d,
                        SymmetricFit& f) {
  double total = 0;
  for (int j = 0; j < kSuperBlock / s.sub_size; ++j) {
    const int off = j * s.sub_size;
    total += assign_symmetric_sub(x + off, s, fits[j], d, f.sc[j], f.q + off);
  }
  return total;
}

// Alternating search from one starting super-scale; returns the error, leaves d and f.
double refine_symmetric(const float* x, const SymmetricSpec& s, const float* fits, float& d,
                        SymmetricFit& f) {
  double err = assign_symmetric(x, s, fits, d, f);
  for (int round = 0; round < kMaxRounds; ++round) {
    double sxu = 0, suu = 0;
    for (int i = 0; i < kSuperBlock; ++i) {
      const double u = double(f.sc[i / s.sub_size]) * f.q[i];
      sxu += x[i] * u;
      suu += u * u;
    }
    if (suu == 0) break;
    float nd = float(sxu / suu);
    SymmetricFit next = f;
    const double next_err = assign_symmetric(x, s, fits, nd, next);
    if (!(next_err < err * (1 - 1e-6))) break;
    err = next_err;
    f = next;
    d = nd;
  }
  return err;
}

}  // namespace

void fit_symmetric(const float* x, const SymmetricSpec& s, SymmetricFit& out) {
  const int n_sub = kSuperBlock / s.sub_size;
  float fits[kMaxSubBlocks];
  float big = 0;
  for (int j = 0; j < n_sub; ++j) {
    fits[j] = fit_sub_symmetric(x + j * s.sub_size, s.sub_size, s.q_min, s.q_max);
    if (std::fabs(fits[j]) > std::fabs(big)) big = fits[j];
  }
  // Two starts: the largest sub-block scale on the long (negative) end of the code range, or
  // on the positive end; which wins depends on how the other sub-blocks fall on the grid.
  float best_d = 0;
  SymmetricFit best;
  double best_err = INFINITY;
  for (const int end : {s.code_min, s.code_max}) {
    float d = big / float(end);
    SymmetricFit f;
    for (int j = 0; j < n_sub; ++j) {  // seed the codes at the float fits
      f.sc[j] = int8_t(d != 0 ? level(fits[j] / d, s.code_min, s.code_max) : 0);
    }
    const double err = refine_symmetric(x, s, fits, d, f);
    if (err < best_err) {
      best_err = err;
      best_d = d;
      best = f;
    }
  }
  // Re-choose the integers for the super-scale as stored.
  uint16_t d_opts[3];
  const int nd = half_candidates(best_d, d_opts);
  double best_final = INFINITY;
  for (int a = 0; a < nd; ++a) {
    SymmetricFit trial = best;
    const double e = assign_symmetric(x, s, fits, fp16_to_fp32(d_opts[a]), trial);
    if (e < best_final) {
      best_final = e;
      out = trial;
      out.d = d_opts[a];
    }
  }
}

}  // namespace sluice::kquant
