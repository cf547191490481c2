/* TEST DOUBLE for NVIDIA's libnccl.so.2 (no GPU on the build machines).
 *
 * Exports the one symbol the NCCL probe (roles/nccl/files/image_nccl_version.py) calls,
 * ncclGetVersion, answering the version code it was compiled with:
 *   cc -shared -fPIC -DNCCL_DOUBLE_VERSION_CODE=23007 -o libnccl.so.2 libnccl_double.c
 * 23007 is how NCCL 2.30.7 codes itself (major*10000 + minor*100 + patch since 2.9).
 * It does no collective: nothing but the version question may be asked of it. */
#ifndef NCCL_DOUBLE_VERSION_CODE
#error "compile with -DNCCL_DOUBLE_VERSION_CODE=<code>, like 23007"
#endif

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4 } ncclResult_t;

ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_DOUBLE_VERSION_CODE;
    return ncclSuccess;
}
