package storage

// ControlPlane persists environments, their work queue, agents, sessions
// and events (SPEC §3, §4). Filled in by the control-plane work.
type ControlPlane interface{}
