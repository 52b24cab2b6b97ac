// Package faultstop stops a process at a chosen point of its code, so that
// a fault-injection test kills it exactly there, never a little later: the
// memstore_faults build of the worker calls Stop at its named fault points
// (internal/workercli), and the tests wait with Stopped before they kill.
package faultstop
