package shadow

import (
	"path/filepath"
	"strconv"
)

// BridgeLibrary is the pgext module's name in shared_preload_libraries.
const BridgeLibrary = "walshadow"

// BridgeSocketName is the bridge socket's default file name in the
// shadow's socket directory.
const BridgeSocketName = "walshadow-bridge.sock"

// Bridge worker settings walshadow writes; they equal the module's own
// defaults and are spelled out so the shadow's postgresql.conf says them.
const (
	bridgeIOTimeoutMS   = 30000
	bridgeLockTimeoutMS = 1000
)

// DefaultBridgeSocketPath is where the bridge listens by default:
// <socketDir>/walshadow-bridge.sock.
func DefaultBridgeSocketPath(socketDir string) string {
	return filepath.Join(socketDir, BridgeSocketName)
}

// BridgeSettings returns what loads the bridge module into a shadow: the
// ShadowConfig.PreloadLibraries entry and the ExtraSettings
// (walshadow.socket_path, walshadow.database, the timeouts, and
// dynamic_library_path when the module is not installed in the server's
// pkglibdir but in libDir). database "" keeps the module's default,
// postgres. libDir and walshadow.so in it must be readable by the shadow's
// OS user.
func BridgeSettings(socketPath, database, libDir string) (preload []string, extra map[string]string) {
	extra = map[string]string{
		"walshadow.socket_path":     socketPath,
		"walshadow.io_timeout_ms":   strconv.Itoa(bridgeIOTimeoutMS),
		"walshadow.lock_timeout_ms": strconv.Itoa(bridgeLockTimeoutMS),
	}
	if database != "" {
		extra["walshadow.database"] = database
	}
	if libDir != "" {
		extra["dynamic_library_path"] = libDir + ":$libdir"
	}
	return []string{BridgeLibrary}, extra
}
