-- Certificates made in C (sys.tls_cert): a CA and the server certificates
-- it signs, checked with the openssl command line and over real HTTPS.
local t = require "hypd.tap"
local core = require "hypd.core"
local http = require "hypd.http"
local server = require "hypd.http_server"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()

-- openssl(args) -> exit status, stdout and stderr together
local function openssl(args)
  local rc, out, err = H.sh("openssl " .. args)
  return rc, (out or "") .. (err or "")
end

local function save(name, pem) return H.write(dir .. "/" .. name, pem) end

local ca_pem, ca_key = assert(sys.tls_cert { cn = "hypd test CA", ca = true })
local leaf_pem, leaf_key = assert(sys.tls_cert { cn = "kube-apiserver", ips = { "127.0.0.1", "::1" },
  dns = { "localhost" }, issuer_cert_pem = ca_pem, issuer_key_pem = ca_key })
local ca_file, leaf_file = save("ca.pem", ca_pem), save("leaf.pem", leaf_pem)

t.test("a leaf signed by the generated CA verifies with openssl", function()
  local rc, out = openssl("verify -CAfile " .. ca_file .. " " .. leaf_file)
  t.eq(rc, 0, out)
  t.like(out, "leaf.pem: OK")
end)

t.test("the CA is a critical CA:TRUE for signing certificates, with its own key id", function()
  local rc, out = openssl("x509 -noout -text -in " .. ca_file)
  t.eq(rc, 0, out)
  t.like(out, "X509v3 Basic Constraints: critical\n%s*CA:TRUE")
  t.like(out, "X509v3 Key Usage: critical\n%s*Certificate Sign, CRL Sign")
  t.like(out, "Subject: CN = hypd test CA")
  t.like(out, "Issuer: CN = hypd test CA")
  t.like(out, "X509v3 Subject Key Identifier")
  t.like(out, "X509v3 Authority Key Identifier")
  t.like(out, "ASN1 OID: prime256v1")
  t.like(out, "Signature Algorithm: ecdsa%-with%-SHA256")
end)

t.test("the leaf names its IPs and DNS names and serves TLS only", function()
  local rc, out = openssl("x509 -noout -text -in " .. leaf_file)
  t.eq(rc, 0, out)
  t.like(out, "IP Address:127%.0%.0%.1")
  t.like(out, "IP Address:0:0:0:0:0:0:0:1")
  t.like(out, "DNS:localhost")
  t.like(out, "X509v3 Basic Constraints: critical\n%s*CA:FALSE")
  t.like(out, "Digital Signature, Key Encipherment")
  t.like(out, "X509v3 Extended Key Usage: \n%s*TLS Web Server Authentication")
  t.like(out, "Issuer: CN = hypd test CA")
  t.like(out, "Subject: CN = kube%-apiserver")
  local serial = out:match("Serial Number:%s*\n%s*([%x:]+)")
  t.eq(serial and #serial, 16 * 3 - 1, "a 16-byte serial")
end)

t.test("the key is PKCS#8 and belongs to the certificate", function()
  t.like(leaf_key, "^%-%-%-%-%-BEGIN PRIVATE KEY%-%-%-%-%-\n")
  local key_file = save("leaf.key", leaf_key)
  local rc1, from_key = openssl("pkey -pubout -in " .. key_file)
  local rc2, from_cert = openssl("x509 -noout -pubkey -in " .. leaf_file)
  t.eq({ rc1, rc2 }, { 0, 0 })
  t.eq(from_key, from_cert)
end)

t.test("validity runs from an hour ago for 3650 days unless days says otherwise", function()
  local now = math.floor(core.wall())
  -- -attime: valid half an hour ago (notBefore = now - 1h), not two hours ago
  t.eq(openssl("verify -attime " .. (now - 1800) .. " -CAfile " .. ca_file .. " " .. ca_file), 0)
  t.ok(openssl("verify -attime " .. (now - 7200) .. " -CAfile " .. ca_file .. " " .. ca_file) ~= 0,
    "not yet valid two hours ago")
  t.eq(openssl("x509 -noout -checkend " .. 3649 * 86400 .. " -in " .. ca_file), 0)
  t.ok(openssl("x509 -noout -checkend " .. 3651 * 86400 .. " -in " .. ca_file) ~= 0, "expires after 3650 days")
  local short = save("short.pem", assert(sys.tls_cert { cn = "short", days = 2 }))
  t.eq(openssl("x509 -noout -checkend " .. 86400 .. " -in " .. short), 0)
  t.ok(openssl("x509 -noout -checkend " .. 3 * 86400 .. " -in " .. short) ~= 0, "expires after 2 days")
end)

t.test("every certificate gets its own key and serial", function()
  local a = assert(sys.tls_cert { cn = "same" })
  local b = assert(sys.tls_cert { cn = "same" })
  t.ok(a ~= b, "two certificates differ")
end)

t.test("bad options return VALIDATION naming the field", function()
  local function field(opts)
    local cert, err = sys.tls_cert(opts)
    t.fails(cert, err, "VALIDATION")
    return err.field, err.message
  end
  t.eq(field {}, "cn")
  t.eq(field { cn = "" }, "cn")
  t.eq(field { cn = 42 }, "cn")
  t.eq(field { cn = ("x"):rep(65) }, "cn")
  local f, msg = field { cn = "x", ips = { "300.1.2.3" } }
  t.eq(f, "ips")
  t.like(msg, "300%.1%.2%.3")
  t.eq(field { cn = "x", ips = { "127.0.0.1junk" } }, "ips")
  t.eq(field { cn = "x", ips = { 127 } }, "ips")
  t.eq(field { cn = "x", ips = "127.0.0.1" }, "ips")
  t.eq(field { cn = "x", dns = { "bad name" } }, "dns")
  t.eq(field { cn = "x", days = 1.5 }, "days")
  t.eq(field { cn = "x", days = -1 }, "days")
  t.eq(field { cn = "x", colour = "red" }, "colour")
  t.eq(field { cn = "x", issuer_cert_pem = ca_pem }, "issuer_key_pem")
  t.eq(field { cn = "x", issuer_key_pem = ca_key }, "issuer_cert_pem")
  t.eq(field { cn = "x", issuer_cert_pem = "not pem", issuer_key_pem = ca_key }, "issuer_cert_pem")
  t.eq(field { cn = "x", issuer_cert_pem = ca_pem, issuer_key_pem = leaf_key }, "issuer_key_pem",
    "a key that is not the CA's")
  t.eq(field { cn = "x", issuer_cert_pem = leaf_pem, issuer_key_pem = leaf_key }, "issuer_cert_pem",
    "a leaf cannot sign")
end)

t.test("an HTTPS server with the leaf answers a client that trusts only the CA", function()
  local srv = assert(server.start { tls = { cert_pem = leaf_pem, key_pem = leaf_key }, handler = function(req)
    return { status = 200, body = "hello " .. req.path }
  end })
  local by_ip, err = http.request { url = "https://127.0.0.1:" .. srv.port .. "/ip", ca_pem = ca_pem }
  local by_name, err2 = http.request { url = "https://localhost:" .. srv.port .. "/name", ca_pem = ca_pem }
  local other_ca = assert(sys.tls_cert { cn = "another CA", ca = true })
  local untrusted, err3 = http.request { url = "https://127.0.0.1:" .. srv.port .. "/", ca_pem = other_ca }
  srv:stop()
  t.eq(err, nil)
  t.eq({ by_ip.status, by_ip.body }, { 200, "hello /ip" })
  t.eq(err2, nil)
  t.eq(by_name.body, "hello /name")
  t.fails(untrusted, err3, "TLS")
end)

t.cleanup(function()
  os.execute("rm -rf " .. H.quote(dir))
end)
