#include "compass/model/caches.hpp"

#include "compass/model/cache_tables.hpp"

namespace compass::model {

Caches::Caches() : tables_(std::make_unique<detail::CacheTables>()) {}
Caches::~Caches() = default;
Caches::Caches(Caches&&) noexcept = default;
Caches& Caches::operator=(Caches&&) noexcept = default;

void Caches::clear() { tables_ = std::make_unique<detail::CacheTables>(); }

}  // namespace compass::model
