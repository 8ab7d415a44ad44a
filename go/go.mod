module example.invalid/csi-proxy-rs/go

go 1.19
