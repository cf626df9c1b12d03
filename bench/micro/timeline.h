// The per-layer reading of a PDL chain's CTA stamps, shared by pdl_timeline.cu (a stand-in
// kernel) and oproj_timeline.cu (spark's own kernel built with stamps).  Each CTA leaves six
// 8-byte words: %globaltimer at entry, past the PDL wait (release), when its weights are
// there (landed; after the wait in spark's order; in oproj_timeline.cu thread 0's own copies),
// at exit, after its products (o and the MMAs), and its %smid.  Per layer: first entry S, first release R, last landing D, last exit
// E.  Medians over the middle layers: launch = S(l) - R(l-1); ready = D(l) - S(l); release =
// R(l) - E(l-1) (the completion-to-release gap); unhidden = D(l) - R(l) (the fetch not hidden
// by the release); tail = E(l) - max(R(l), D(l)); o/cta = a CTA's products end less the later
// of its release and landing, averaged over the layer's CTAs; CTA/SM = the most CTAs of the
// layer on one SM; period = E(l) - E(l-1).  Host code only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

constexpr int kTimelineStamps = 6;

struct TimelineRow {
  double launch, ready, release, unhidden, tail, o_cta, cta_per_sm, period;  // us (CTA/SM a count)
};

inline double timeline_median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0.0 : x[x.size() / 2];
}

// st: [layers][ctas][kTimelineStamps]; sms: the device's SM count.
inline TimelineRow read_timeline(const std::vector<unsigned long long>& st, int layers, int ctas, int sms) {
  // Times relative to the earliest stamp, in integers first: nanoseconds since the epoch do
  // not survive a conversion to double at this resolution.
  unsigned long long base = ~0ull;
  for (size_t i = 0; i < st.size(); i += kTimelineStamps) base = std::min(base, st[i]);
  const auto us_of = [base](unsigned long long t) { return double(t - base) * 1e-3; };
  std::vector<double> S(layers), R(layers), D(layers), E(layers), O(layers), P(layers);
  for (int l = 0; l < layers; ++l) {
    unsigned long long s = ~0ull, r = ~0ull, d = 0, e = 0, o_sum = 0;
    std::vector<int> per_sm(sms, 0);
    for (int c = 0; c < ctas; ++c) {
      const unsigned long long* x = &st[(size_t(l) * ctas + c) * kTimelineStamps];
      s = std::min(s, x[0]), r = std::min(r, x[1]), d = std::max(d, x[2]), e = std::max(e, x[3]);
      o_sum += x[4] - std::max(x[1], x[2]);  // stamps of one thread, in order
      if (x[5] < per_sm.size()) ++per_sm[x[5]];
    }
    S[l] = us_of(s), R[l] = us_of(r), D[l] = us_of(d), E[l] = us_of(e);
    O[l] = double(o_sum) / ctas * 1e-3, P[l] = *std::max_element(per_sm.begin(), per_sm.end());
  }
  std::vector<double> period, launch, ready, release, unhidden, tail, o_time, per_sm_max;
  for (int l = 4; l < layers - 4; ++l) {
    period.push_back(E[l] - E[l - 1]);
    launch.push_back(S[l] - R[l - 1]);
    ready.push_back(D[l] - S[l]);
    release.push_back(R[l] - E[l - 1]);
    unhidden.push_back(D[l] - R[l]);
    tail.push_back(E[l] - std::max(R[l], D[l]));
    o_time.push_back(O[l]);
    per_sm_max.push_back(P[l]);
  }
  return {timeline_median(launch),   timeline_median(ready), timeline_median(release),
          timeline_median(unhidden), timeline_median(tail),  timeline_median(o_time),
          timeline_median(per_sm_max), timeline_median(period)};
}
