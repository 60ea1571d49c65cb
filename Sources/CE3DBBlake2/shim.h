#ifndef CE3DBBLAKE2_SHIM_H
#define CE3DBBLAKE2_SHIM_H
#include <blake2.h>
#endif
