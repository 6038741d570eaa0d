#ifndef NDSERVE_SERVER_PROMETHEUS_FWD_H_
#define NDSERVE_SERVER_PROMETHEUS_FWD_H_

// Declarations of the prometheus-cpp types that server/ headers name only by pointer, so
// those headers need not include prometheus-cpp (its headers pull in the whole client
// library); the .cc files that record or register include the real headers.
namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

#endif  // NDSERVE_SERVER_PROMETHEUS_FWD_H_
