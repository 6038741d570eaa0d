# Debian's cpp-httplib is a compiled library whose classes change layout with its
# CPPHTTPLIB_*_SUPPORT defines (the OpenSSL one adds members to Request and the client).
# Code that includes httplib.h must see exactly the defines the library was built with,
# which its pkg-config file carries; without them the two sides disagree about object
# sizes and the process crashes (e.g. "free(): invalid size"). So the library is only
# ever used through this imported target, never by a bare include path.
find_package(PkgConfig REQUIRED)
pkg_check_modules(NDSERVE_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
add_library(ndserve::httplib ALIAS PkgConfig::NDSERVE_HTTPLIB)
