// E3DBIdentity: work in progress; see the project's issues.
