// E3DBDocuments: work in progress; see the project's issues.
