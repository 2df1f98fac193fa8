#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#endif
