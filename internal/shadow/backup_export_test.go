package shadow

import (
	"strings"
	"testing"
)

func TestBaseBackupCommand(t *testing.T) {
	cmd, err := loadBackupCommand(BaseBackupOptions{Label: "it's", Fast: true, MaxRate: 64})
	if err != nil {
		t.Fatal(err)
	}
	want := `BASE_BACKUP (LABEL 'it''s', WAL false, MANIFEST 'no', WAIT false, CHECKPOINT 'fast', MAX_RATE 64)`
	if cmd != want {
		t.Fatalf("command %s, want %s", cmd, want)
	}
	cmd, err = loadBackupCommand(BaseBackupOptions{})
	if err != nil || strings.Contains(cmd, "CHECKPOINT") || strings.Contains(cmd, "MAX_RATE") || !strings.Contains(cmd, "'walshadow-load'") {
		t.Fatalf("default command %s, %v", cmd, err)
	}
	for _, rate := range []int{-1, 31, 1048577} {
		if _, err := loadBackupCommand(BaseBackupOptions{MaxRate: rate}); err == nil {
			t.Errorf("max rate %d accepted", rate)
		}
	}
}
