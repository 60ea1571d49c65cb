#ifndef CBENCHSODIUM_SHIM_H
#define CBENCHSODIUM_SHIM_H
#include <sodium.h>
#endif
