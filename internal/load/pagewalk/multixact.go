package pagewalk

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// pg_multixact layout (access/transam/multixact.c).
const (
	multiOffsetsPerPage     = BlockSize / 4 // MULTIXACT_OFFSETS_PER_PAGE
	memberFlagBytesPerGroup = 4             // MULTIXACT_FLAGBYTES_PER_GROUP
	membersPerGroup         = 4             // MULTIXACT_MEMBERS_PER_MEMBERGROUP
	memberGroupSize         = memberFlagBytesPerGroup + membersPerGroup*4
	memberGroupsPerPage     = BlockSize / memberGroupSize
	membersPerPage          = memberGroupsPerPage * membersPerGroup
	// maxMembers bounds one multixact's member list when its end is not
	// recorded (the newest one): PostgreSQL has one member per locker, so
	// a list this long means garbage.
	maxMembers = 1 << 20
)

// MultiStatus is a member's lock or update mode (MultiXactStatus).
type MultiStatus uint8

const (
	MultiForKeyShare    MultiStatus = 0
	MultiForShare       MultiStatus = 1
	MultiForNoKeyUpdate MultiStatus = 2
	MultiForUpdate      MultiStatus = 3
	MultiNoKeyUpdate    MultiStatus = 4
	MultiUpdate         MultiStatus = 5
)

// IsUpdate reports a member that updated or deleted the tuple
// (ISUPDATE_from_mxstatus), as opposed to one that only locked it.
func (s MultiStatus) IsUpdate() bool { return s > MultiForUpdate }

// MultiMember is one transaction of a multixact.
type MultiMember struct {
	Xid    uint32
	Status MultiStatus
}

// Multixacts reads a backup's pg_multixact/offsets and members.
type Multixacts struct{ offsets, members *slru }

// NewMultixacts returns an empty pg_multixact.
func NewMultixacts() *Multixacts {
	return &Multixacts{newSLRU("pg_multixact/offsets"), newSLRU("pg_multixact/members")}
}

// AddOffsets records pg_multixact/offsets/<name>.
func (m *Multixacts) AddOffsets(name string, data []byte) error { return m.offsets.add(name, data) }

// AddMembers records pg_multixact/members/<name>.
func (m *Multixacts) AddMembers(name string, data []byte) error { return m.members.add(name, data) }

// offset returns multi's first member offset; 0 means not assigned.
func (m *Multixacts) offset(multi uint32) (uint32, bool) {
	b, ok := m.offsets.bytesAt(uint64(multi)*4, 4)
	if !ok {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

// member returns the member at offset off, ok false when its page is not
// in the backup.
func (m *Multixacts) member(off uint32) (MultiMember, bool) {
	page := uint64(off / membersPerPage)
	group := (off / membersPerGroup) % memberGroupsPerPage
	base := page*BlockSize + uint64(group)*memberGroupSize
	in := off % membersPerGroup
	flags, ok := m.members.bytesAt(base, memberFlagBytesPerGroup)
	if !ok {
		return MultiMember{}, false
	}
	x, ok := m.members.bytesAt(base+memberFlagBytesPerGroup+uint64(in)*4, 4)
	if !ok {
		return MultiMember{}, false
	}
	return MultiMember{Xid: binary.LittleEndian.Uint32(x), Status: MultiStatus(flags[in])}, true
}

// Members returns multi's members. A multixact whose offset or members the
// backup does not hold is an error ("unboundable multixact").
func (m *Multixacts) Members(multi uint32) ([]MultiMember, error) {
	if multi == 0 {
		return nil, fmt.Errorf("unboundable multixact 0 (InvalidMultiXactId)")
	}
	start, ok := m.offset(multi)
	if !ok && m.offsets.beyondNewest(uint64(multi)*4/BlockSize) || ok && start == 0 {
		return nil, errMultiAfterCopy
	}
	if !ok {
		return nil, fmt.Errorf("unboundable multixact %d: its pg_multixact/offsets entry is not in the backup", multi)
	}
	next := multi + 1
	if next == 0 {
		next = 1 // FirstMultiXactId after wraparound
	}
	end, ok := m.offset(next)
	var n uint32
	bounded := ok && end != 0
	if bounded {
		n = end - start // member offsets wrap around like xids
		if n > maxMembers {
			return nil, fmt.Errorf("unboundable multixact %d: offsets %d to %d", multi, start, end)
		}
	}
	var out []MultiMember
	for i := uint32(0); bounded && i < n || !bounded && i < maxMembers; i++ {
		off := start + i
		mem, ok := m.member(off)
		if !ok {
			if !bounded && i > 0 {
				break // the newest multixact ends where the members written end
			}
			if i == 0 && m.members.beyondNewest(uint64(off/membersPerPage)) {
				return nil, errMultiAfterCopy
			}
			return nil, fmt.Errorf("unboundable multixact %d: member %d (offset %d) is not in the backup's pg_multixact/members", multi, i, off)
		}
		if mem.Xid == 0 {
			if !bounded {
				break // the newest multixact: slots past it are still zero
			}
			continue // offset 0 is never used (slot zero after wraparound)
		}
		out = append(out, mem)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("unboundable multixact %d: no members at offset %d", multi, start)
	}
	return out, nil
}

// errMultiAfterCopy: the multixact is newer than the backup's copy of
// pg_multixact (SLRU files are written at checkpoints and evictions, so
// the copy holds at least every multixact of before the backup's start
// checkpoint).
var errMultiAfterCopy = errors.New("multixact created after pg_multixact was copied")

// Updater returns the member that updated or deleted (at most one per
// multixact), ok false when every member only locked, or when the
// multixact is newer than the copy: an updater of it began after the
// backup started, so the backup counts it as not committed (the load's
// handoff streams its changes).
func (m *Multixacts) Updater(multi uint32) (xid uint32, ok bool, err error) {
	members, err := m.Members(multi)
	if errors.Is(err, errMultiAfterCopy) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	for _, mem := range members {
		if mem.Status > MultiUpdate {
			return 0, false, fmt.Errorf("multixact %d: member %d has unknown status %d", multi, mem.Xid, mem.Status)
		}
		if mem.Status.IsUpdate() {
			return mem.Xid, true, nil
		}
	}
	return 0, false, nil
}
