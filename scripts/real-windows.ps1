<#
.SYNOPSIS
The real-Windows tier of csi-proxy in one command (docs/real-windows.md):
run on a Windows Server node, from an elevated PowerShell, in a checkout of
this repository.

.DESCRIPTION
Steps (-Step, several allowed; default all):
  features        with -InstallFeatures: Hyper-V PowerShell (upstream's
                  tests make their VHDs with it) and the iSCSI Target Server
                  (the iSCSI tests log in to it), where Install-WindowsFeature
                  exists (Windows Server); starts the iSCSI initiator
                  service (MSiSCSI).
  tests-msvc      cargo test --workspace --no-fail-fast for
                  x86_64-pc-windows-msvc, run natively, one test thread:
                  the tests/real_windows_* tests run instead of reporting
                  themselves skipped, one at a time (they share the host);
                  TEMP and TMP in their long form meanwhile.
  tests-gnu       the same for x86_64-pc-windows-gnu (needs mingw-w64 gcc on
                  PATH, e.g. MSYS2's mingw64\bin). cargo runs from outside
                  the repository, so .cargo/config.toml (wine as the runner,
                  for the Linux host) does not apply.
  bench           crates/csi-proxy/benches/pipes against upstream's
                  csi-proxy.exe built from -Upstream, alternating rounds;
                  the table goes to <OutDir>\bench-table.md; then the
                  confined walk's fast path with and without its final-path
                  proof (csi-proxy-host bench confined_fast_path,
                  <OutDir>\fast-path.log).
  go-library      library mode (docs/library-mode.md): csi_proxy.dll built
                  for x86_64-pc-windows-msvc and the Go package go/csiproxy's
                  tests run against it (go test, CGO_ENABLED=0).
  upstream-tests  our csi-proxy.exe installed with install-service, started
                  through the SCM, upstream's integrationtests run against
                  it with go test -json (<OutDir>\upstream-tests.json); the
                  service is removed afterwards.
Prints, per step, tests passed/failed/ignored and the tests that reported
"SKIPPED (needs real Windows)" (on real Windows there should be none), and
exits 1 if any step failed. Logs go to -OutDir.

.PARAMETER Upstream
A checkout of kubernetes-csi/csi-proxy at commit
eeba470682d91bd60d0cc5b02c9000193d86fbbe (bench, upstream-tests). Never
inside this repository's tracked files.

.PARAMETER GoCheck
The Windows build of compat/go/csi-proxy-go-check (the Go client of the
go_client_pipes tests and of the bench). Default: where
`compat/go/build.sh windows` puts it; if missing there, it is built with Go
in module mode (needs the Go module proxy).

.EXAMPLE
.\scripts\real-windows.ps1 -InstallFeatures -Upstream C:\src\csi-proxy-upstream
#>
[CmdletBinding()]
param(
    [ValidateSet('all', 'features', 'tests-msvc', 'tests-gnu', 'go-library', 'bench', 'upstream-tests')]
    [string[]] $Step = @('all'),
    [switch] $InstallFeatures,
    [string] $Upstream,
    [string] $GoCheck,
    [string] $OutDir,
    [string] $ServiceName = 'csiproxy'
)

Set-StrictMode -Version 3
$ErrorActionPreference = 'Stop'

$PinnedUpstream = 'eeba470682d91bd60d0cc5b02c9000193d86fbbe'
$RepoRoot = Split-Path -Parent $PSScriptRoot
$TargetDir = if ($env:CARGO_TARGET_DIR) { $env:CARGO_TARGET_DIR } else { Join-Path $RepoRoot 'target' }
if (-not $OutDir) { $OutDir = Join-Path $TargetDir 'real-windows' }
New-Item -ItemType Directory -Force -Path $OutDir | Out-Null
$OutDir = (Resolve-Path $OutDir).Path
if ($Upstream) { $Upstream = (Resolve-Path $Upstream).Path }
if ($GoCheck) { $GoCheck = (Resolve-Path $GoCheck).Path }

$script:Summary = @()

function Add-Summary([string] $Name, [string] $Result, [string] $Detail) {
    $script:Summary += [pscustomobject]@{ Step = $Name; Result = $Result; Detail = $Detail }
    Write-Host ("<== {0}: {1} {2}" -f $Name, $Result, $Detail)
}

# Runs a native command with its output (stdout and stderr) shown and kept
# in $Log; returns its exit code.
function Invoke-Logged([string] $Log, [string] $Exe, [string[]] $Arguments) {
    Write-Host ("==> {0} {1}" -f $Exe, ($Arguments -join ' '))
    $saved = $ErrorActionPreference
    $ErrorActionPreference = 'Continue'
    try {
        & $Exe @Arguments 2>&1 | ForEach-Object { "$_" } | Tee-Object -FilePath $Log | Out-Host
        return $LASTEXITCODE
    } finally {
        $ErrorActionPreference = $saved
    }
}

# Counts from a libtest log written with --show-output: the summed
# "test result:" lines, and the tests whose output holds a
# "SKIPPED (needs real Windows)" line (each counted once).
function Get-TestCounts([string] $Log) {
    $passed = 0; $failed = 0; $ignored = 0
    $binary = ''; $test = ''
    $skipped = [ordered]@{}
    foreach ($line in Get-Content -LiteralPath $Log) {
        if ($line -match '^\s*Running (.+)$') { $binary = $Matches[1]; $test = ''; continue }
        if ($line -match '^\s*Doc-tests (\S+)') { $binary = "doc $($Matches[1])"; $test = ''; continue }
        if ($line -match '^---- (.+) stdout ----$') { $test = $Matches[1]; continue }
        if ($line -match '^SKIPPED \(needs real Windows\): (.*)$') {
            $key = "$binary $test"
            if (-not $skipped.Contains($key)) { $skipped[$key] = $Matches[1] }
            continue
        }
        if ($line -match '^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored') {
            $passed += [int]$Matches[1]; $failed += [int]$Matches[2]; $ignored += [int]$Matches[3]
        }
    }
    [pscustomobject]@{ Passed = $passed; Failed = $failed; Ignored = $ignored; Skipped = $skipped }
}

# The long form of an existing path (GetLongPathNameW); the path as given
# if it cannot be had.
function Get-LongPath([string] $Path) {
    if (-not ('CsiProxyTier.Native' -as [type])) {
        Add-Type -Namespace CsiProxyTier -Name Native -MemberDefinition @'
[DllImport("kernel32.dll", CharSet = CharSet.Unicode, SetLastError = true)]
public static extern uint GetLongPathNameW(string shortPath, System.Text.StringBuilder longPath, uint size);
'@
    }
    $buf = New-Object System.Text.StringBuilder 32768
    $n = [CsiProxyTier.Native]::GetLongPathNameW($Path, $buf, [uint32]$buf.Capacity)
    if ($n -eq 0 -or $n -ge $buf.Capacity) { return $Path }
    return $buf.ToString()
}

function Resolve-GoCheck {
    if ($GoCheck) { return $GoCheck }
    $default = Join-Path $TargetDir 'x86_64-pc-windows-gnu\tmp\go-check\windows\csi-proxy-go-check.exe'
    if (Test-Path -LiteralPath $default) { return $default }
    if (-not (Get-Command go -ErrorAction SilentlyContinue)) {
        throw "the Go client is missing ($default) and go is not installed: build it on Linux with compat/go/build.sh windows and pass -GoCheck, or install Go"
    }
    # Module mode, with the grpc-go release Debian 12 packages (what
    # compat/go/build.sh builds against).
    $src = Join-Path $OutDir 'go-check-src'
    Remove-Item -Recurse -Force -LiteralPath $src -ErrorAction SilentlyContinue
    New-Item -ItemType Directory -Path $src | Out-Null
    Copy-Item -Path (Join-Path $RepoRoot 'compat\go\csi-proxy-go-check\*.go') -Destination $src
    $exe = Join-Path $OutDir 'csi-proxy-go-check.exe'
    Push-Location $src
    try {
        $n = 0
        foreach ($cmd in @(
                @('mod', 'init', 'csi-proxy-go-check'),
                @('get', 'google.golang.org/grpc@v1.33.3'),
                @('mod', 'tidy'),
                @('build', '-o', $exe, '.'))) {
            $n++
            $log = Join-Path $OutDir "go-check-build-$n.log"
            if ((Invoke-Logged -Log $log -Exe 'go' -Arguments $cmd) -ne 0) {
                throw "building the Go client failed (go $($cmd -join ' ')); see $log"
            }
        }
    } finally {
        Pop-Location
    }
    return $exe
}

function Step-Features {
    if (-not $InstallFeatures) {
        Add-Summary 'features' 'skipped' '(no -InstallFeatures)'
        return
    }
    if (-not (Get-Command Install-WindowsFeature -ErrorAction SilentlyContinue)) {
        Write-Warning 'Install-WindowsFeature is missing (not Windows Server): add Hyper-V PowerShell and the iSCSI Target Server by hand; tests that need them say so'
        Add-Summary 'features' 'skipped' '(no Install-WindowsFeature)'
        return
    }
    $done = @()
    foreach ($feature in 'Hyper-V-PowerShell', 'FS-iSCSITarget-Server') {
        $r = Install-WindowsFeature -Name $feature
        $done += "$feature success=$($r.Success) restart-needed=$($r.RestartNeeded)"
    }
    # The iSCSI initiator (MSFT_iSCSI* classes) needs its service; Windows
    # Server ships it stopped, set to manual start.
    try {
        Set-Service -Name MSiSCSI -StartupType Automatic
        Start-Service -Name MSiSCSI
        $done += "MSiSCSI $((Get-Service -Name MSiSCSI).Status)"
    } catch {
        Write-Warning "cannot start the iSCSI initiator service MSiSCSI: $_"
        $done += 'MSiSCSI not started'
    }
    Add-Summary 'features' 'ok' ($done -join '; ')
}

function Step-Tests([string] $Name, [string] $Target) {
    $env:CSI_PROXY_GO_CHECK_EXE = Resolve-GoCheck
    $log = Join-Path $OutDir "$Name.log"
    # --no-fail-fast: a failing test binary must not keep the later ones
    # (the real_windows_* tests) from running. --test-threads=1: the
    # real_windows_* tests share the host (the iSCSI portal
    # 127.0.0.1:3260, disk numbers, the host-volume scan that sees every
    # VHDX attached), so no two of them may run at once.
    $cargoArgs = @('test', '--manifest-path', (Join-Path $RepoRoot 'Cargo.toml'), '--workspace',
        '--locked', '--no-fail-fast', '--target', $Target, '--', '--show-output', '--test-threads=1')
    if ($Target -like '*-gnu') {
        $gcc = Get-Command x86_64-w64-mingw32-gcc -ErrorAction SilentlyContinue
        if (-not $gcc) { $gcc = Get-Command gcc -ErrorAction SilentlyContinue }
        if (-not $gcc) {
            Add-Summary $Name 'FAILED' '(no mingw-w64 gcc on PATH: install MSYS2 mingw-w64-x86_64-gcc, add mingw64\bin)'
            return
        }
        $env:CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER = $gcc.Source
    }
    # The tests make their roots under %TEMP% and name paths below them;
    # the proxy takes its roots in the long form, and the runners spell
    # %TEMP% short (C:\Users\RUNNER~1\...): the suite gets the long form
    # (the tests that want a short root make one on purpose).
    $savedTemp = $env:TEMP; $savedTmp = $env:TMP
    $env:TEMP = Get-LongPath $env:TEMP; $env:TMP = Get-LongPath $env:TMP
    Write-Host "TEMP=$env:TEMP TMP=$env:TMP"
    # Outside the repository: its .cargo/config.toml is for the Linux host.
    Push-Location ([System.IO.Path]::GetTempPath())
    try {
        $rc = Invoke-Logged -Log $log -Exe 'cargo' -Arguments $cargoArgs
    } finally {
        Pop-Location
        $env:TEMP = $savedTemp; $env:TMP = $savedTmp
    }
    $c = Get-TestCounts $log
    $detail = "passed $($c.Passed), failed $($c.Failed), ignored $($c.Ignored), SKIPPED (needs real Windows) $($c.Skipped.Count)"
    foreach ($k in $c.Skipped.Keys) { Write-Host "    skipped: $k -- $($c.Skipped[$k])" }
    Add-Summary $Name $(if ($rc -eq 0) { 'ok' } else { "FAILED (exit $rc)" }) $detail
}

function Test-UpstreamCheckout {
    if (-not $Upstream) {
        throw "-Upstream is required: a checkout of kubernetes-csi/csi-proxy at $PinnedUpstream"
    }
    if (Test-Path -LiteralPath (Join-Path $Upstream '.git')) {
        $head = (& git -C $Upstream rev-parse HEAD).Trim()
        if ($head -ne $PinnedUpstream) {
            Write-Warning "upstream checkout is at $head, not the pinned $PinnedUpstream"
        }
    }
}

function Assert-NoService {
    $svc = Get-Service -Name $ServiceName -ErrorAction SilentlyContinue
    if ($svc) {
        throw "service $ServiceName exists ($($svc.Status)): remove it first (csi-proxy.exe uninstall-service -service-name=$ServiceName); the bench and upstream's tests use the default pipe names"
    }
}

function Step-Bench {
    Test-UpstreamCheckout
    Assert-NoService
    New-Item -ItemType Directory -Force -Path (Join-Path $OutDir 'upstream') | Out-Null
    $exe = Join-Path $OutDir 'upstream\csi-proxy.exe'
    $log = Join-Path $OutDir 'upstream-build.log'
    Push-Location $Upstream
    $savedFlags = $env:GOFLAGS; $savedCgo = $env:CGO_ENABLED
    try {
        $env:GOFLAGS = '-mod=vendor'; $env:CGO_ENABLED = '0'
        $rc = Invoke-Logged -Log $log -Exe 'go' -Arguments @('build', '-o', $exe, './cmd/csi-proxy')
    } finally {
        $env:GOFLAGS = $savedFlags; $env:CGO_ENABLED = $savedCgo
        Pop-Location
    }
    if ($rc -ne 0) { Add-Summary 'bench' "FAILED (go build exit $rc)" "see $log"; return }
    $env:CSI_PROXY_GO_CHECK_EXE = Resolve-GoCheck
    $env:CSI_PROXY_UPSTREAM_EXE = $exe
    $log = Join-Path $OutDir 'bench.log'
    Push-Location $RepoRoot
    try {
        $rc = Invoke-Logged -Log $log -Exe 'cargo' -Arguments @('bench', '--locked', '-p', 'csi-proxy',
            '--bench', 'pipes', '--target', 'x86_64-pc-windows-msvc')
    } finally {
        Remove-Item Env:\CSI_PROXY_UPSTREAM_EXE
        Pop-Location
    }
    $table = Join-Path $OutDir 'bench-table.md'
    Get-Content -LiteralPath $log | Where-Object { $_ -match '^(\||ours:|upstream:|grpc-go client)' } |
        Set-Content -LiteralPath $table
    Add-Summary 'bench' $(if ($rc -eq 0) { 'ok' } else { "FAILED (exit $rc)" }) "table: $table"
    $log = Join-Path $OutDir 'fast-path.log'
    Push-Location $RepoRoot
    try {
        $rc = Invoke-Logged -Log $log -Exe 'cargo' -Arguments @('bench', '--locked', '-p', 'csi-proxy-host',
            '--features', 'bench-internals', '--bench', 'confined_fast_path', '--target', 'x86_64-pc-windows-msvc')
    } finally {
        Pop-Location
    }
    Add-Summary 'fast-path' $(if ($rc -eq 0) { 'ok' } else { "FAILED (exit $rc)" }) "see $log"
}

function Step-GoLibrary {
    $log = Join-Path $OutDir 'go-library.log'
    Push-Location $RepoRoot
    try {
        $rc = Invoke-Logged -Log $log -Exe 'cargo' -Arguments @('build', '--locked', '--release', '-p', 'csi-proxy-ffi',
            '--target', 'x86_64-pc-windows-msvc')
    } finally {
        Pop-Location
    }
    if ($rc -ne 0) { Add-Summary 'go-library' "FAILED (cargo build exit $rc)" "see $log"; return }
    $dll = Join-Path $RepoRoot 'target\x86_64-pc-windows-msvc\release\csi_proxy.dll'
    $saved = @{ DLL = $env:CSI_PROXY_DLL; CGO = $env:CGO_ENABLED; FLAGS = $env:GOFLAGS; PROXY = $env:GOPROXY }
    Push-Location (Join-Path $RepoRoot 'go')
    try {
        $env:CSI_PROXY_DLL = $dll; $env:CGO_ENABLED = '0'; $env:GOFLAGS = '-mod=mod'; $env:GOPROXY = 'off'
        $rc = Invoke-Logged -Log $log -Exe 'go' -Arguments @('test', '-v', './...')
    } finally {
        $env:CSI_PROXY_DLL = $saved.DLL; $env:CGO_ENABLED = $saved.CGO; $env:GOFLAGS = $saved.FLAGS; $env:GOPROXY = $saved.PROXY
        Pop-Location
    }
    $skips = @(Get-Content -LiteralPath $log | Where-Object { $_ -match '^\s*--- SKIP' }).Count
    Add-Summary 'go-library' $(if ($rc -eq 0) { 'ok' } else { "FAILED (go test exit $rc)" }) "go tests skipped: $skips; see $log"
}

function Wait-Pipe([string] $Name, [int] $Seconds) {
    $deadline = (Get-Date).AddSeconds($Seconds)
    while ((Get-Date) -lt $deadline) {
        if ([System.IO.Directory]::GetFiles('\\.\pipe\') -contains "\\.\pipe\$Name") { return $true }
        Start-Sleep -Milliseconds 500
    }
    return $false
}

function Step-UpstreamTests {
    Test-UpstreamCheckout
    Assert-NoService
    $log = Join-Path $OutDir 'build-release.log'
    $rc = Invoke-Logged -Log $log -Exe 'cargo' -Arguments @('build', '--release', '--locked',
        '--manifest-path', (Join-Path $RepoRoot 'Cargo.toml'), '-p', 'csi-proxy', '--target', 'x86_64-pc-windows-msvc')
    if ($rc -ne 0) { Add-Summary 'upstream-tests' "FAILED (cargo build exit $rc)" "see $log"; return }
    # The service runs a copy: a later build may replace the original.
    $svcDir = Join-Path $OutDir 'service'
    New-Item -ItemType Directory -Force -Path $svcDir | Out-Null
    $exe = Join-Path $svcDir 'csi-proxy.exe'
    Copy-Item -Force -LiteralPath (Join-Path $TargetDir 'x86_64-pc-windows-msvc\release\csi-proxy.exe') -Destination $exe
    # Upstream's tests work under the default kubelet path.
    New-Item -ItemType Directory -Force -Path 'C:\var\lib\kubelet' | Out-Null
    $serviceLog = Join-Path $svcDir 'csi-proxy.log'
    $report = Join-Path $OutDir 'upstream-tests.json'
    $installLog = Join-Path $OutDir 'install-service.log'
    $rc = Invoke-Logged -Log $installLog -Exe $exe -Arguments @('install-service', "-service-name=$ServiceName",
        '-v=5', '-logtostderr=false', "-log_file=$serviceLog", '-metrics-bind-address=localhost:8888')
    if ($rc -ne 0) { Add-Summary 'upstream-tests' "FAILED (install-service exit $rc)" "see $installLog"; return }
    try {
        Start-Service -Name $ServiceName
        if (-not (Wait-Pipe 'csi-proxy-filesystem-v1' 60)) {
            throw "service $ServiceName started but serves no \\.\pipe\csi-proxy-filesystem-v1 after 60 s; see $serviceLog"
        }
        Write-Host "service ${ServiceName}: $((Get-Service -Name $ServiceName).Status)"
        Push-Location $Upstream
        $saved = $ErrorActionPreference
        $savedModulePath = $env:PSModulePath
        try {
            $ErrorActionPreference = 'Continue'
            $env:GOFLAGS = '-mod=vendor'
            # Upstream's tests start powershell.exe (Windows PowerShell 5.1).
            # Started from pwsh it would inherit pwsh's module paths first and
            # load pwsh's modules, so ConvertTo-SecureString fails
            # (PowerShell/PowerShell#18530): the children get the machine's
            # PSModulePath, as under `shell: powershell`.
            $machineModulePath = [Environment]::GetEnvironmentVariable('PSModulePath', 'Machine')
            if ($machineModulePath) {
                $env:PSModulePath = [Environment]::ExpandEnvironmentVariables($machineModulePath)
            }
            Write-Host "==> go test -json -timeout 40m ./integrationtests/... > $report"
            # The report keeps every line; the console gets one per finished test.
            & go test -json -timeout 40m ./integrationtests/... 2>&1 | ForEach-Object {
                $line = "$_"
                if ($line -match '"Action":"(pass|fail|skip)".*"Test":"([^"]*)"') {
                    Write-Host ("    {0,-4} {1}" -f $Matches[1], $Matches[2])
                } elseif (-not $line.StartsWith('{')) {
                    Write-Host "    $line"
                }
                $line
            } | Set-Content -LiteralPath $report
            $rc = $LASTEXITCODE
        } finally {
            $ErrorActionPreference = $saved
            $env:PSModulePath = $savedModulePath
            Remove-Item Env:\GOFLAGS -ErrorAction SilentlyContinue
            Pop-Location
        }
    } finally {
        Stop-Service -Name $ServiceName -ErrorAction SilentlyContinue
        Invoke-Logged -Log (Join-Path $OutDir 'uninstall-service.log') -Exe $exe -Arguments @('uninstall-service',
            "-service-name=$ServiceName") | Out-Null
    }
    $counts = @{ pass = 0; fail = 0; skip = 0 }
    $failedTests = @()
    foreach ($line in Get-Content -LiteralPath $report) {
        if (-not $line.StartsWith('{')) { continue }
        $e = $line | ConvertFrom-Json
        if (-not ($e.PSObject.Properties['Test'] -and $e.Test)) { continue }
        if ($counts.ContainsKey($e.Action)) { $counts[$e.Action]++ }
        if ($e.Action -eq 'fail') { $failedTests += $e.Test }
    }
    foreach ($t in $failedTests) { Write-Host "    failed: $t" }
    $detail = "go tests (with subtests) passed $($counts.pass), failed $($counts.fail), skipped $($counts.skip); report $report"
    Add-Summary 'upstream-tests' $(if ($rc -eq 0) { 'ok' } else { "FAILED (go test exit $rc)" }) $detail
}

$steps = if ($Step -contains 'all') { @('features', 'tests-msvc', 'tests-gnu', 'go-library', 'bench', 'upstream-tests') } else { $Step }
foreach ($s in $steps) {
    Write-Host "`n=== $s"
    try {
        switch ($s) {
            'features' { Step-Features }
            'tests-msvc' { Step-Tests 'tests-msvc' 'x86_64-pc-windows-msvc' }
            'tests-gnu' { Step-Tests 'tests-gnu' 'x86_64-pc-windows-gnu' }
            'go-library' { Step-GoLibrary }
            'bench' { Step-Bench }
            'upstream-tests' { Step-UpstreamTests }
        }
    } catch {
        Add-Summary $s 'FAILED' "$_"
    }
}

Write-Host "`n=== summary (logs in $OutDir)"
$text = $script:Summary | ForEach-Object { '{0,-15} {1,-22} {2}' -f $_.Step, $_.Result, $_.Detail }
$text | ForEach-Object { Write-Host "    $_" }
$text | Set-Content -LiteralPath (Join-Path $OutDir 'summary.txt')
if ($script:Summary | Where-Object { $_.Result -like 'FAILED*' }) { exit 1 }
exit 0
