package sizeclass

// osClassReserve bounds the address space one class reserves on this
// platform. On Linux a reservation is address space only (mmap with no
// access), so a class may reserve up to maxClassReserve.
const osClassReserve = maxClassReserve
