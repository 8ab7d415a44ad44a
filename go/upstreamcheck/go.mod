module example.invalid/csi-proxy-rs/go/upstreamcheck

go 1.25.0

require (
	example.invalid/csi-proxy-rs/go v0.0.0
	github.com/kubernetes-csi/csi-proxy/v2 v2.0.0-00010101000000-000000000000
)

// check.sh builds a temporary copy of this module with upstream's module
// and the modules it vendors replaced by local directories.
replace example.invalid/csi-proxy-rs/go => ../
