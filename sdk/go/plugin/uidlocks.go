package plugin

import "sync"

// UIDLocks serialises Deploy and Delete of one pod UID while other UIDs proceed, the Go
// counterpart of the Python kit's per-UID locks: Deploy MUST be idempotent on the UID also when
// the host sends several Deploys of a new UID at once, and "look it up, create it if missing" is
// only safe under the UID's lock (unless the cloud refuses a second create itself).
//
//	unlock := locks.Lock(req.Request.Uid)
//	defer unlock()
//
// A UID's entry exists only while someone holds or waits for it, so the registry holds the UIDs
// in flight, not every pod ever deployed. The zero value is ready to use.
type UIDLocks struct {
	mu      sync.Mutex
	entries map[string]*uidEntry
}

type uidEntry struct {
	mu    sync.Mutex
	users int // holders and waiters
}

// Lock blocks until the caller holds uid's lock and returns the function that releases it.
func (l *UIDLocks) Lock(uid string) (unlock func()) {
	l.mu.Lock()
	if l.entries == nil {
		l.entries = map[string]*uidEntry{}
	}
	entry := l.entries[uid]
	if entry == nil {
		entry = &uidEntry{}
		l.entries[uid] = entry
	}
	entry.users++
	l.mu.Unlock()

	entry.mu.Lock()
	return func() {
		entry.mu.Unlock()
		l.mu.Lock()
		entry.users--
		if entry.users == 0 && l.entries[uid] == entry {
			delete(l.entries, uid)
		}
		l.mu.Unlock()
	}
}

// Len is how many UIDs are held or waited for.
func (l *UIDLocks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}
