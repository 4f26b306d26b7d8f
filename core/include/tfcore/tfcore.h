/* tfcore/tfcore.h — everything a plugin author needs, in one include. */
#ifndef TFCORE_TFCORE_H
#define TFCORE_TFCORE_H

#include "tfcore/error.h"
#include "tfcore/log.h"
#include "tfcore/dtype.h"
#include "tfcore/rng.h"
#include "tfcore/file.h"
#include "tfcore/file_read.h"
#include "tfcore/safetensors.h"
#include "tfcore/plugin.h"
#include "tfcore/config.h"
#include "tfcore/batch.h"
#include "tfcore/backend.h"
#include "tfcore/model.h"
#include "tfcore/dataset.h"
#include "tfcore/comm.h"
#include "tfcore/precision.h"

#endif
