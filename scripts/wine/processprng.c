/*
 * Minimal stand-in for Windows' bcryptprimitives.dll, for running Rust
 * programs under wine 8.0 only (never shipped, never used on real Windows).
 *
 * Rust std >= 1.78 imports ProcessPrng from bcryptprimitives.dll to seed its
 * hash maps; wine 8.0 has no such DLL, so every Rust executable fails to load
 * (exit code 53, STATUS_DLL_NOT_FOUND c0000135). This DLL exports ProcessPrng
 * on top of RtlGenRandom (advapi32!SystemFunction036), which wine implements.
 *
 * Build (scripts/setup.sh does this):
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll processprng.c -ladvapi32
 * On x86_64 the WINAPI calling convention does not decorate names, so the
 * export is plain "ProcessPrng" without a .def file.
 */
#include <windows.h>

/* RtlGenRandom; declared here rather than through <ntsecapi.h>. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

/*
 * Fills pbData with cbData random bytes. The real function is documented to
 * always return TRUE; this one returns FALSE only if RtlGenRandom fails.
 * RtlGenRandom takes a 32-bit length, so large requests go in chunks.
 */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE pbData, SIZE_T cbData)
{
    const SIZE_T chunk = 0x10000000; /* 256 MiB, well below ULONG_MAX */

    while (cbData > 0) {
        ULONG n = (ULONG)(cbData < chunk ? cbData : chunk);
        if (!SystemFunction036(pbData, n)) {
            return FALSE;
        }
        pbData += n;
        cbData -= n;
    }
    return TRUE;
}
