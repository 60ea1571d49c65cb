// E3DBFiles: work in progress; see the project's issues.
