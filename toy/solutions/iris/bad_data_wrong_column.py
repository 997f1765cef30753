import os

import pandas as pd
from sklearn.ensemble import RandomForestClassifier

DATA_DIR = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(DATA_DIR, "train.csv"))
test = pd.read_csv(os.path.join(DATA_DIR, "test.csv"))
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_wdth"]
model = RandomForestClassifier(n_estimators=300, min_samples_leaf=2, random_state=0)
model.fit(train[FEATURES], train["species"])
proba = model.predict_proba(test[FEATURES])
submission = pd.DataFrame(proba, columns=model.classes_)
submission.insert(0, "id", test["id"].to_numpy())
submission.to_csv(os.environ["SUBMISSION_PATH"], index=False)
