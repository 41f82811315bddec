// The system zlib (zlib1g-dev), for the store's compressed copies of raw payloads.
#include <zlib.h>
