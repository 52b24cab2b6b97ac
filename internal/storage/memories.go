package storage

// MemoryStores persists memory stores, memories and their versions
// (SPEC §2). Filled in by the memory-stores work.
type MemoryStores interface{}
