#pragma once
// Working memory of the CPU device's ops: a growable aligned array, and the guard that keeps
// OpenBLAS on the calling thread while the device's own pool splits the work.

#include <algorithm>
#include <cstddef>
#include <cstdlib>

#include <cblas.h>

#include "gpu/cpu/cpu_memory.h"

namespace spillway::gpu::cpu {

// A growable scratch array of 64-byte aligned bytes; grows only, so once warmed up an op never
// allocates.
class Scratch {
public:
    Scratch() = default;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() { freeHostMemory(m_data); }

    template <class T>
    T* reserve(size_t count)
    {
        const size_t bytes = count * sizeof(T);
        if (bytes > m_bytes) {
            const size_t grown = std::max(bytes, m_bytes + m_bytes / 2);
            void* fresh = allocateHostMemory(grown);
            if (!fresh) std::abort();  // scratch is tiny next to the weights it serves
            freeHostMemory(m_data);
            m_data = fresh;
            m_bytes = grown;
        }
        return static_cast<T*>(m_data);
    }

private:
    void* m_data = nullptr;
    size_t m_bytes = 0;
};

// OpenBLAS computes on the calling thread while the device's own pool splits the work.
class BlasOnThisThread {
public:
    BlasOnThisThread() : m_before(openblas_get_num_threads())
    {
        if (m_before != 1) openblas_set_num_threads(1);
    }
    ~BlasOnThisThread()
    {
        if (m_before != 1) openblas_set_num_threads(m_before);
    }
    BlasOnThisThread(const BlasOnThisThread&) = delete;
    BlasOnThisThread& operator=(const BlasOnThisThread&) = delete;

private:
    int m_before;
};

}  // namespace spillway::gpu::cpu
