import os

import pandas as pd
from sklearn.neighbors import KNeighborsClassifier

d = os.environ["DATA_DIR"]
train = pd.read_csv(d + "/train.csv")
test = pd.read_csv(d + "/test.csv")
sample = pd.read_csv(d + "/sampleSubmission.csv")
feats = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
model = KNeighborsClassifier(n_neighbors=7).fit(train[feats], train["species"])
sample[list(model.classes_)] = model.predict_proba(test[feats])
sample.to_csv(os.environ["SUBMISSION_PATH"], index=False)
