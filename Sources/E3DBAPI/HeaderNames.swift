package import HTTPTypes

extension HTTPField.Name {
    /// `X-Backup-Client`: the account's backup client, in the answer to a registration (exactly one field).
    package static var xBackupClient: Self { Self("X-Backup-Client")! }
    /// `Content-MD5`: a file body's MD5 (standard base64), which the server (and S3) check an upload against.
    package static var contentMD5: Self { Self("Content-MD5")! }
}
