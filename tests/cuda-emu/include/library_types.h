/* library_types.h — the test-only CUDA emulation's stand-in (see
 * cuda_runtime.h): the data-type enumeration the CUDA libraries share, with
 * the real header's values. */
#ifndef TF_CUDA_EMU_LIBRARY_TYPES_H
#define TF_CUDA_EMU_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
    CUDA_R_16F = 2,
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16BF = 14,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

#endif
