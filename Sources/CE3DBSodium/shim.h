#ifndef CE3DBSODIUM_SHIM_H
#define CE3DBSODIUM_SHIM_H
#include <sodium.h>
#endif
